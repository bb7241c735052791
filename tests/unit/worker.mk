# tests/unit for src/worker

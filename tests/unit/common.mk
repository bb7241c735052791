# tests/unit for src/common

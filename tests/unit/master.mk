# tests/unit for src/master

# tests/unit for the worker engine (runq, loop, outq, state_table, scope, app_registry)

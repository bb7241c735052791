# tests/integration: drive the built pagid over real sockets. Run by ./dev.sh
# test (python3 tests/integration/run.py build/pagid), not by make check.
EXTRA_DIST += tests/integration

# tests/integration: drive the built pagid over real sockets (run-integration.sh).
EXTRA_DIST += tests/integration

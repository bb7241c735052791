# examples: built only against the installed header (see examples/Makefile);
# shipped in the tarball, not built by the top-level build.
EXTRA_DIST += examples/counter.c examples/kv.c examples/Makefile examples/README.md

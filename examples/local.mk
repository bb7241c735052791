# examples: built only against the installed header (see examples/Makefile);
# shipped in the tarball and installed as source into $(docdir)/examples for
# app authors (pagi(3), pagi_easy(3) point there), not built by the top-level
# build.
examplesdir = $(docdir)/examples
dist_examples_DATA = examples/counter.c examples/kv.c examples/polls.c examples/Makefile examples/README.md

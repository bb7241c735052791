# examples: built only against the installed header (see examples/Makefile)

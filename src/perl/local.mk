# src/perl: the embedded Perl host (built when configure finds libperl).
if WITH_PERL
noinst_LIBRARIES += libpagid_perl.a
libpagid_perl_a_SOURCES = \
	src/perl/perl_int.h src/perl/perl_host.h \
	src/perl/perl_host.c src/perl/perl_xs.c src/perl/perl_events.c
nodist_libpagid_perl_a_SOURCES = src/perl/perl_glue.c
# Perl's headers are not written for -Wshadow/-Wextra; the rest of the flags stay.
libpagid_perl_a_CFLAGS = $(AM_CFLAGS) $(PERL_CFLAGS) -Wno-shadow -Wno-unused-function
BUILT_SOURCES = src/perl/perl_glue.c
CLEANFILES = src/perl/perl_glue.c
src/perl/perl_glue.c: $(srcdir)/src/perl/Pagid.pm
	$(AM_V_GEN)$(MKDIR_P) src/perl && $(PERL) -e 'local $$/; my $$s = <STDIN>; $$s =~ s/([\\"])/\\$$1/g; $$s =~ s/\n/\\n"\n"/g; print qq{/* generated from src/perl/Pagid.pm */\n#include "perl/perl_int.h"\nconst char perl_glue_source[] = "$$s";\n}' < $(srcdir)/src/perl/Pagid.pm > $@
endif
EXTRA_DIST += src/perl/Pagid.pm

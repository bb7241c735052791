# src/perl: the embedded Perl host (built when configure finds libperl).
if WITH_PERL
noinst_LIBRARIES += libpagid_perl.a
libpagid_perl_a_SOURCES = \
	src/perl/perl_int.h src/perl/perl_host.h \
	src/perl/perl_host.c src/perl/perl_xs.c src/perl/perl_events.c src/perl/perl_loop_xs.c \
	src/perl/perl_pubsub.c src/perl/perl_shared_xs.c \
	src/perl/perl_pool_xs.c src/perl/perl_watch_xs.c
nodist_libpagid_perl_a_SOURCES = src/perl/perl_glue.c src/perl/perl_modules.c
# Perl's headers are not written for -Wshadow/-Wextra; the rest of the flags stay.
libpagid_perl_a_CFLAGS = $(AM_CFLAGS) $(PERL_CFLAGS) -Wno-shadow -Wno-unused-function
BUILT_SOURCES = src/perl/perl_glue.c src/perl/perl_modules.c
# The worker pool's relay of PSGI requests (C, no Perl runs in it).
libpagid_perl_a_SOURCES += src/perl/perl_pool_relay.c
libpagid_perl_a_SOURCES += src/perl/perl_pool_link.c
libpagid_perl_a_SOURCES += src/perl/perl_pool_serve.c
libpagid_perl_a_SOURCES += src/perl/perl_pool_env.c
CLEANFILES = src/perl/perl_glue.c src/perl/perl_modules.c
src/perl/perl_glue.c: $(srcdir)/src/perl/Pagid.pm
	$(AM_V_GEN)$(MKDIR_P) src/perl && $(PERL) -e 'local $$/; my $$s = <STDIN>; $$s =~ s/([\\"])/\\$$1/g; $$s =~ s/\n/\\n"\n"/g; print qq{/* generated from src/perl/Pagid.pm */\n#include "perl/perl_int.h"\nconst char perl_glue_source[] = "$$s";\n}' < $(srcdir)/src/perl/Pagid.pm > $@
# The modules pagid serves to `require` (their names as require sees them).
PERL_EMBEDDED = PAGI/Server/Pagid/Loops.pm IO/Async/Loop/Pagid.pm AnyEvent/Impl/Pagid.pm EV.pm \
	PAGI/Server/Pagid/PSGI.pm PAGI/Server/Pagid/Pool.pm
src/perl/perl_modules.c: $(srcdir)/src/perl/embed_modules.pl \
		$(srcdir)/src/perl/lib/PAGI/Server/Pagid/Loops.pm $(srcdir)/src/perl/lib/IO/Async/Loop/Pagid.pm \
		$(srcdir)/src/perl/lib/AnyEvent/Impl/Pagid.pm $(srcdir)/src/perl/lib/EV.pm \
		$(srcdir)/src/perl/lib/PAGI/Server/Pagid/PSGI.pm \
		$(srcdir)/src/perl/lib/PAGI/Server/Pagid/Pool.pm
	$(AM_V_GEN)$(MKDIR_P) src/perl && $(PERL) $(srcdir)/src/perl/embed_modules.pl $(srcdir)/src/perl/lib $(PERL_EMBEDDED) > $@
endif
EXTRA_DIST += src/perl/Pagid.pm src/perl/embed_modules.pl \
	src/perl/lib/PAGI/Server/Pagid/Loops.pm src/perl/lib/IO/Async/Loop/Pagid.pm \
	src/perl/lib/AnyEvent/Impl/Pagid.pm src/perl/lib/EV.pm src/perl/lib/PAGI/Server/Pagid/PSGI.pm \
	src/perl/lib/PAGI/Server/Pagid/Pool.pm

/*
 * perl_host.h - the Perl host's app table, used by the app registry for
 * `.pl` app specs when pagid is built with the Perl host.
 */
#ifndef PAGID_PERL_HOST_H
#define PAGID_PERL_HOST_H

#include <stddef.h>

#include "pagi/pagi.h"

extern const pagi_app app_perl;

/**
 * Preload (pagid's zygote, before workers fork): start the interpreter
 * and compile the app file, as the app's create would, and keep the code
 * reference for the create of a forked worker to take instead of loading
 * the file again. One preload serves one create of the same file (an app
 * mounted twice is preloaded twice). No loop exists yet: code that starts
 * a timer or watches a file descriptor at load time cannot be preloaded:
 * -2 (the caller loads the app in each worker instead). 0, or -1 with a
 * message in err.
 */
int perl_host_preload(const char *file, char *err, size_t errlen);

/** Flush every PerlIO handle, when an interpreter exists (before a fork). */
void perl_host_flush_output(void);

#endif

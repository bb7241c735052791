/*
 * cli_print.h - what pagid prints before exiting instead of serving:
 * -V (version, build features, configure arguments) and -T (the effective
 * configuration as YAML).
 */
#ifndef PAGID_CLI_PRINT_H
#define PAGID_CLI_PRINT_H

#include <stdio.h>

#include "cli.h"

/** pagid -V: "pagid X.Y.Z", the compiler, "features: ...", libraries, configure arguments. */
void cli_print_build(FILE *out);

/**
 * pagid -T after a valid config: a comment line naming the source, then
 * the config as YAML, with -I directories put in front of the Perl app's
 * lib list (what the workers will use). May change c->perl_lib. 0, or -1
 * when writing failed.
 */
int cli_print_config(const cli_options *o, pagid_config *c, FILE *out);

#endif

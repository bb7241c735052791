/*
 * cli.h - the command line: options, and building the effective config
 * (defaults, then -c FILE, then -l/-w/-a/-u overrides).
 */
#ifndef PAGID_CLI_H
#define PAGID_CLI_H

#include <stdio.h>
#include "common/config.h"

typedef struct cli_options {
    const char *config_file; /* -c */
    int test_only;           /* -t */
    int show_version;        /* -v/--version */
    int show_help;           /* -h/--help */
    const char **listens;    /* -l, repeatable (owned array, borrowed strings) */
    size_t n_listens;
    const char *cert, *key; /* --cert/--key: of the https:// listeners of -l */
    const char *workers;    /* -w */
    const char *app;        /* -a */
    const char *user;       /* -u USER[:GROUP] */
    int preload;            /* --preload 1, --no-preload -1, 0: the file's */
    int debug;              /* -D/--debug: debug mode on (else the file's `debug`) */
    const char **perl_libs; /* -I, repeatable (owned array, borrowed strings) */
    size_t n_perl_libs;
    int show_build;          /* -V: version, build features, configure arguments */
    int dump_config;         /* -T: -t, then the effective config as YAML (test_only set too) */
    const char *signal_name; /* -s: reload, reopen, stop, quit, upgrade (checked by cli_parse) */
    /* Not options: the addresses of the sockets systemd passed (or an
     * upgrading master passed on), the listeners when neither the file nor
     * -l names any. Owned. */
    char **activated;
    size_t n_activated;
} cli_options;

/** Parse argv; 0, or -1 after printing a usage error to err. */
int cli_parse(int argc, char **argv, cli_options *o, FILE *err);
void cli_options_free(cli_options *o);
void cli_usage(FILE *out);
/**
 * Build the effective config into c. With no listen entry in the file or
 * on the command line, o->activated are the listeners (socket activation:
 * serve exactly the passed sockets), else the default one. When it is valid, the Perl host's
 * library path (PAGID_PERL_LIB, read by the workers) is set anew from -I and
 * the file's `app: {perl: FILE, lib: [...]}`, so a reload never accumulates. Errors are printed to
 * err
 * ("FILE:LINE:COLUMN: message" for the file). Returns the error count.
 */
int cli_build_config(const cli_options *o, pagid_config *c, FILE *err);

#endif

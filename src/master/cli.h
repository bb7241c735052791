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
    /* The Perl developer's options (pagi-server's and plackup's; cli_dev.c).
     * app_positional is `pagid app.pl`, stored in app as well. */
    const char *host, *port; /* -o/--host, -p/--port: one more listener */
    const char *access_log;  /* --access-log FILE, '-' for standard error */
    const char *access_log_format;
    const char *max_requests; /* --max-requests N */
    const char *timeout;      /* --timeout DURATION: timeouts.keepalive */
    const char *log_level;    /* --log-level LEVEL: error_log.level */
    const char *env;          /* -E/--env MODE: PAGI_ENV (PLACK_ENV for PSGI) */
    const char *eval;         /* -e CODE: the app, a PAGI code reference */
    const char **modules;     /* -M MODULE[=ARGS], repeatable, for -e */
    size_t n_modules;
    int dev;            /* --dev (or -E development): development mode */
    const char *pool;   /* --pool N (Starman's --workers): NULL, else pool_processes is N */
    int pool_processes; /* 0..CONFIG_POOL_MAX_PROCESSES (checked by cli_parse) */
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
 * the file's `app: {perl: FILE, lib: [...]}`, so a reload never accumulates, and so
 * are PAGI_ENV and PLACK_ENV (cli_dev.c). Errors are printed to err
 * ("FILE:LINE:COLUMN: message" for the file). Returns the error count.
 */
int cli_build_config(const cli_options *o, pagid_config *c, FILE *err);

/* cli_dev.c: the options a Perl developer brings from pagi-server and plackup. */

/** Is o in development mode (--dev or -E development)? */
int cli_dev_mode(const cli_options *o);
/** The -o/-p listener as "HOST:PORT" into buf (NULL when neither is given). */
const char *cli_dev_listen_spec(const cli_options *o, char *out, size_t len);
/**
 * Apply --access-log, --access-log-format, --max-requests, --timeout,
 * --log-level, -e/-M, --dev's defaults and --pool to c (after the file and
 * -w/-a, before config_finalize). Errors printed to err; returns their count.
 */
int cli_dev_apply(const cli_options *o, pagid_config *c, FILE *err);
/** Set PAGI_ENV (and PLACK_ENV when c serves a PSGI app) for the workers; 0 or -1. */
int cli_dev_set_env(const cli_options *o, const pagid_config *c);

#endif

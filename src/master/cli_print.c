/*
 * cli_print.c - pagid -V and -T. The feature list comes from the
 * PAGID_WITH_* defines that configure.ac sets where it decides what to
 * build, and the library versions from the libraries themselves at run
 * time, so -V cannot claim what the binary does not have.
 */
#include <config.h> /* autoconf's: PACKAGE_VERSION, PAGID_WITH_*, PAGID_CONFIGURE_ARGS */

#include "cli_print.h"

#include <ev.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include <zlib.h>

#include "common/config_dump.h"
#include "pagi/pagi.h"

void cli_print_build(FILE *out)
{
    static const char *const features[] = {
#ifdef PAGID_WITH_PERL
        "perl", /* the embedded Perl host: -a app.pl */
#endif
#ifdef PAGID_WITH_SYSTEMD
        "systemd", /* sd_notify, socket activation, the watchdog */
#endif
#ifdef PAGID_WITH_ZLIB
        "permessage-deflate", /* WebSocket compression */
#endif
#ifdef PAGID_WITH_TLS
        "tls",
#endif
#ifdef PAGID_WITH_SANITIZERS
        "sanitizers", /* ASan + UBSan: a test build */
#endif
        NULL,
    };
    fprintf(out, "pagid %s\n", PACKAGE_VERSION);
    fprintf(out, "pagi ABI %d.%d (modules of ABI %d.0 to %d.%d load), PAGI spec %s\n",
            PAGI_ABI_MAJOR, PAGI_ABI_MINOR, PAGI_ABI_MAJOR, PAGI_ABI_MAJOR, PAGI_ABI_MINOR,
            PAGI_SPEC_VERSION);
#ifdef __VERSION__
#ifdef __clang__
    fprintf(out, "built by clang %s\n", __clang_version__);
#else
    fprintf(out, "built by gcc %s\n", __VERSION__);
#endif
#endif
    fputs("features:", out);
    for (size_t i = 0; features[i]; i++)
        fprintf(out, " %s", features[i]);
    fputc('\n', out);
    fprintf(out, "libraries: libev %d.%d, libyaml %s, zlib %s", ev_version_major(),
            ev_version_minor(), yaml_get_version_string(), zlibVersion());
#ifdef PAGID_PERL_VERSION
    fprintf(out, ", perl %s", PAGID_PERL_VERSION);
#endif
    fputc('\n', out);
    fprintf(out, "configure arguments: %s\n", PAGID_CONFIGURE_ARGS);
}

/* -I comes first in the workers' @INC (cli.c's set_perl_lib_env): show it so. */
static int prepend_perl_libs(const cli_options *o, pagid_config *c)
{
    if (o->n_perl_libs == 0)
        return 0;
    size_t len = c->perl_lib ? strlen(c->perl_lib) + 1 : 1;
    for (size_t i = 0; i < o->n_perl_libs; i++)
        len += strlen(o->perl_libs[i]) + 1;
    char *joined = malloc(len), *p = joined;
    if (!joined)
        return -1;
    for (size_t i = 0; i < o->n_perl_libs; i++)
        p += sprintf(p, "%s%s", i ? ":" : "", o->perl_libs[i]);
    if (c->perl_lib)
        sprintf(p, ":%s", c->perl_lib);
    free(c->perl_lib);
    c->perl_lib = joined;
    return 0;
}

int cli_print_config(const cli_options *o, pagid_config *c, FILE *out)
{
    if (prepend_perl_libs(o, c) < 0)
        return -1;
    if (o->config_file)
        fprintf(out,
                "# pagid %s: the configuration %s is valid; in effect (with the command "
                "line's overrides):\n",
                PACKAGE_VERSION, o->config_file);
    else
        fprintf(out,
                "# pagid %s: no configuration file; in effect (defaults and the command "
                "line's overrides):\n",
                PACKAGE_VERSION);
    if (config_dump(c, out) < 0 || fflush(out) != 0)
        return -1;
    return 0;
}

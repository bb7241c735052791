/*
 * cli.c - the command line: getopt_long parsing into cli_options, and the
 * effective config: defaults, then -c FILE, then -l/-w/-a/-u, then finalize.
 */
#include "cli.h"

#include "common/buf.h"
#include "listeners.h"
#include "signal_cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Long-only options. */
enum { OPT_CERT = 0x100, OPT_KEY };

static const struct option long_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"test", no_argument, NULL, 't'},
    {"listen", required_argument, NULL, 'l'},
    {"workers", required_argument, NULL, 'w'},
    {"app", required_argument, NULL, 'a'},
    {"version", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"perl-lib", required_argument, NULL, 'I'},
    {"build-info", no_argument, NULL, 'V'},
    {"dump-config", no_argument, NULL, 'T'},
    {"signal", required_argument, NULL, 's'},
    {"user", required_argument, NULL, 'u'},
    {"preload", no_argument, NULL, 'P'},
    {"no-preload", no_argument, NULL, 'N'},
    {"debug", no_argument, NULL, 'D'},
    {"cert", required_argument, NULL, OPT_CERT},
    {"key", required_argument, NULL, OPT_KEY},
    {NULL, 0, NULL, 0},
};

void cli_usage(FILE *out)
{
    fputs("Usage: pagid [OPTIONS]\n"
          "Serve a PAGI application from a master process and pre-forked workers.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE    read the configuration from FILE (YAML, see pagid.yaml(5))\n"
          "  -t, --test           check the configuration, report every error and exit\n"
          "  -T, --dump-config    check it like -t, then print the effective configuration "
          "as YAML\n"
          "  -l, --listen ADDR    listen on HOST:PORT, [V6]:PORT, :PORT or unix:/PATH; "
          "repeatable, replaces the file's list;\n"
          "                       https://HOST:PORT is a TLS listener (needs --cert and --key)\n"
          "      --cert FILE      the certificate (PEM, leaf first, then its chain) of the "
          "https:// listeners\n"
          "      --key FILE       its private key (PEM; read as root before privileges are "
          "dropped)\n"
          "  -w, --workers N      worker processes: a number, 'auto' (one per CPU) or 0 "
          "(single process, no master)\n"
          "  -a, --app SPEC       the app: hello, echo, demo, pubsub, static:DIR, a module "
          "PATH.so[:ARG],\n"
          "                       a PAGI Perl app FILE.pl or a PSGI app FILE.psgi\n"
          "  -I, --perl-lib DIR   add DIR to a Perl app's @INC (repeatable)\n"
          "  -u, --user USER[:GROUP] run the workers as USER (and GROUP, else USER's own) when "
          "started as root;\n"
          "                       replaces the file's user and group; '-u root' keeps root\n"
          "      --preload, --no-preload  load the apps once before the workers fork (a zygote "
          "per\n"
          "                       generation), or in each worker; replaces the file's preload\n"
          "  -D, --debug          debug mode: check the apps' use of the C interface (stale "
          "handles,\n"
          "                       misuse) and warn of callbacks holding the loop over 100 ms\n"
          "  -s, --signal SIGNAL  signal the running master (the pid_file of the configuration): "
          "reload,\n"
          "                       reopen (logs), quit (graceful stop), stop (fast stop), or "
          "upgrade\n"
          "                       (waits until the new binary's master serves)\n"
          "  -v, --version        print the version and exit\n"
          "  -V, --build-info     print the version, build features and configure arguments\n"
          "  -h, --help           print this help and exit\n"
          "\n"
          "Without -c no file is read: built-in defaults apply (listen " CONFIG_DEFAULT_LISTEN
          ", app " CONFIG_DEFAULT_APP ").\n",
          out);
}

static int usage_error(FILE *err, const char *what, const char *arg, size_t arglen)
{
    fprintf(err, "pagid: %s '%.*s'\nTry 'pagid --help' for more information.\n", what, (int)arglen,
            arg);
    return -1;
}

/* The long option named by "--name[=value]", or NULL. */
static const struct option *find_long(const char *arg)
{
    size_t n = strcspn(arg + 2, "=");
    for (const struct option *lo = long_options; lo->name; lo++)
        if (strlen(lo->name) == n && strncmp(lo->name, arg + 2, n) == 0)
            return lo;
    return NULL;
}

/*
 * Report a getopt failure naming the option as typed. glibc gives no direct
 * way to tell long from short: optopt is 0 for an unknown long option and
 * the short equivalent for a known one used wrongly, while an unknown short
 * option mid-cluster ("-xt") leaves argv[optind - 1] at the previous word.
 */
static int option_error(FILE *err, char **argv, int missing)
{
    const char *arg = optind > 0 ? argv[optind - 1] : NULL;
    const struct option *lo = arg && strncmp(arg, "--", 2) == 0 ? find_long(arg) : NULL;
    if (arg && strncmp(arg, "--", 2) == 0 && (optopt == 0 || (lo && lo->val == optopt))) {
        const char *what = missing ? "missing argument for option"
                           : lo    ? "option takes no argument"
                                   : "unknown option";
        return usage_error(err, what, arg, strcspn(arg, "="));
    }
    char opt[2] = {'-', (char)optopt};
    return usage_error(err, missing ? "missing argument for option" : "unknown option", opt, 2);
}

int cli_parse(int argc, char **argv, cli_options *o, FILE *err)
{
    memset(o, 0, sizeof *o);
    /* optind 0 fully re-initialises glibc's getopt, so tests can parse twice. */
    optind = 0;
    opterr = 0;
    for (;;) {
        int ch = getopt_long(argc, argv, ":c:tl:w:a:vhI:VTs:u:D", long_options, NULL);
        if (ch == -1)
            break;
        switch (ch) {
        case 'c':
            o->config_file = optarg;
            break;
        case 't':
            o->test_only = 1;
            break;
        case 'l': {
            const char **v = realloc(o->listens, (o->n_listens + 1) * sizeof *v);
            if (!v) {
                fprintf(err, "pagid: out of memory\n");
                cli_options_free(o);
                return -1;
            }
            v[o->n_listens++] = optarg;
            o->listens = v;
            break;
        }
        case 'w':
            o->workers = optarg;
            break;
        case 'a':
            o->app = optarg;
            break;
        case 'u':
            o->user = optarg;
            break;
        case 'D':
            o->debug = 1;
            break;
        case OPT_CERT:
            o->cert = optarg;
            break;
        case OPT_KEY:
            o->key = optarg;
            break;
        case 'P':
        case 'N':
            o->preload = ch == 'P' ? 1 : -1;
            break;
        case 'I': {
            const char **v = realloc(o->perl_libs, (o->n_perl_libs + 1) * sizeof *v);
            if (!v) {
                fprintf(err, "pagid: out of memory\n");
                cli_options_free(o);
                return -1;
            }
            v[o->n_perl_libs++] = optarg;
            o->perl_libs = v;
            break;
        }
        case 'v':
            o->show_version = 1;
            break;
        case 'h':
            o->show_help = 1;
            break;
        case 'V':
            o->show_build = 1;
            break;
        case 'T':
            o->test_only = o->dump_config = 1;
            break;
        case 's':
            if (signal_cli_signo(optarg) < 0) {
                cli_options_free(o);
                fprintf(err,
                        "pagid: -s: unknown signal '%s' (expected " SIGNAL_CLI_NAMES ")\n"
                        "Try 'pagid --help' for more information.\n",
                        optarg);
                return -1;
            }
            o->signal_name = optarg;
            break;
        case ':':
            cli_options_free(o);
            return option_error(err, argv, 1);
        default:
            cli_options_free(o);
            return option_error(err, argv, 0);
        }
    }
    if (optind < argc) {
        cli_options_free(o);
        return usage_error(err, "unexpected argument", argv[optind], strlen(argv[optind]));
    }
    if (o->signal_name && o->test_only) {
        cli_options_free(o);
        return usage_error(err, "-s cannot be combined with", "-t/-T", 5);
    }
    return 0;
}

void cli_options_free(cli_options *o)
{
    free(o->listens);
    o->listens = NULL;
    o->n_listens = 0;
    free(o->perl_libs);
    o->perl_libs = NULL;
    o->n_perl_libs = 0;
    for (size_t i = 0; i < o->n_activated; i++)
        free(o->activated[i]);
    free(o->activated);
    o->activated = NULL;
    o->n_activated = 0;
}

/*
 * The Perl host runs in the workers, behind the public app interface, so its
 * @INC additions travel in the environment they inherit: -I first, then the
 * file's lib list. Built from scratch each time, so a reload never piles up.
 */
static int set_perl_lib_env(const cli_options *o, const pagid_config *c)
{
    buf v = BUF_INIT;
    int rc = 0;
    for (size_t i = 0; i < o->n_perl_libs; i++)
        rc |= buf_printf(&v, "%s%s", buf_size(&v) ? ":" : "", o->perl_libs[i]);
    if (c->perl_lib)
        rc |= buf_printf(&v, "%s%s", buf_size(&v) ? ":" : "", c->perl_lib);
    if (rc == 0 && buf_append(&v, "", 1) == 0) /* NUL-terminate */
        rc = buf_size(&v) > 1 ? setenv("PAGID_PERL_LIB", buf_head(&v), 1)
                              : unsetenv("PAGID_PERL_LIB");
    else
        rc = -1;
    buf_free(&v);
    return rc;
}

/* -u USER[:GROUP]: both replace the file's (a group of the file's would
 * otherwise pair with a user it was not written for). 0 or -1 after saying why. */
static int set_user(pagid_config *c, const char *spec, FILE *err)
{
    const char *colon = strchr(spec, ':');
    size_t ulen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (ulen == 0 || (colon && !colon[1]) || (colon && strchr(colon + 1, ':'))) {
        fprintf(err, "pagid: -u: expected USER or USER:GROUP, not '%s'\n", spec);
        return -1;
    }
    char *user = strndup(spec, ulen);
    char *group = colon ? strdup(colon + 1) : NULL;
    if (!user || (colon && !group)) {
        free(user);
        free(group);
        fprintf(err, "pagid: out of memory\n");
        return -1;
    }
    free(c->user);
    free(c->group);
    c->user = user;
    c->group = group;
    c->user_pos = c->group_pos = (pagid_pos){0};
    return 0;
}

static int cli_has_https(const cli_options *o)
{
    for (size_t i = 0; i < o->n_listens; i++)
        if (!strncmp(o->listens[i], "https://", 8))
            return 1;
    return 0;
}

/* -l ADDR, http://ADDR or https://ADDR (then with --cert/--key). 0, or 1
 * after saying why. */
static int add_cli_listen(const cli_options *o, pagid_config *c, const char *spec, FILE *err)
{
    const char *msg;
    int tls = !strncmp(spec, "https://", 8);
    const char *addr = tls ? spec + 8 : !strncmp(spec, "http://", 7) ? spec + 7 : spec;
    if (tls && (!o->cert || !o->key)) {
        fprintf(err, "pagid: -l %s: an https listener needs --cert FILE and --key FILE\n", spec);
        return 1;
    }
    if (config_add_listen(c, addr, &msg) < 0) {
        fprintf(err, "pagid: -l: invalid listen address '%s': %s\n", spec, msg);
        return 1;
    }
    if (!tls)
        return 0;
    pagid_listen *l = &c->listens[c->n_listens - 1];
    if (!(l->tls = config_tls_new()) ||
        config_tls_add_cert(l->tls, o->cert, o->key, (pagid_pos){0}) < 0) {
        fprintf(err, "pagid: out of memory\n");
        return 1;
    }
    return 0;
}

int cli_build_config(const cli_options *o, pagid_config *c, FILE *err)
{
    const char *msg;
    int errors = 0;

    config_init_defaults(c);
    if (o->config_file)
        errors += config_load_file(c, o->config_file, err);

    if (o->n_listens > 0) {
        config_clear_listens(c);
        for (size_t i = 0; i < o->n_listens; i++)
            errors += add_cli_listen(o, c, o->listens[i], err);
    }
    if ((o->cert || o->key) && !cli_has_https(o)) {
        fprintf(err, "pagid: --cert and --key are for -l https://HOST:PORT listeners, and none "
                     "is given\n");
        errors++;
    }
    /* Socket activation and no listener named anywhere: the passed sockets
     * are the listeners (not the default 127.0.0.1:8080 beside them). One
     * bound to the status listener's address stays that one's. */
    for (size_t i = 0, none = c->n_listens == 0; none && i < o->n_activated; i++) {
        if (c->status_listen && strcmp(c->status_listen->spec, o->activated[i]) == 0)
            continue;
        if (config_add_listen(c, o->activated[i], &msg) < 0) {
            fprintf(err, "pagid: socket activation: unusable address '%s': %s\n", o->activated[i],
                    msg);
            errors++;
        }
    }
    if (o->workers && config_parse_workers(o->workers, &c->workers, &msg) < 0) {
        fprintf(err, "pagid: -w: invalid workers '%s': %s\n", o->workers, msg);
        errors++;
    }
    if (o->app) {
        char why[512];
        if (config_check_app(o->app, why, sizeof why) < 0) {
            fprintf(err, "pagid: -a: %s\n", why);
            errors++;
        } else if (config_set_app(c, o->app, &msg) < 0) {
            fprintf(err, "pagid: -a: %s\n", msg);
            errors++;
        }
    }
    if (o->user && set_user(c, o->user, err) < 0)
        errors++;
    if (o->preload)
        c->preload = o->preload > 0;
    if (o->debug)
        c->debug = 1;
    if (config_finalize(c, err) < 0)
        errors++;
    else
        errors += listeners_check_overlap(c, err); /* pagid -t, start and reload alike */
    if (errors == 0 && set_perl_lib_env(o, c) < 0) {
        fprintf(err, "pagid: out of memory\n");
        errors++;
    }
    return errors;
}

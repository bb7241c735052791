/*
 * cli.c - the command line: getopt_long parsing into cli_options, and the
 * effective config: defaults, then -c FILE, then -l/-w/-a/-u and the Perl
 * developer's options (cli_dev.c, --pool too), then finalize.
 */
#include "cli.h"

#include "common/buf.h"
#include "listeners.h"
#include "signal_cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Long-only options. */
enum {
    OPT_CERT = 0x100,
    OPT_KEY,
    OPT_ACCESS_LOG,
    OPT_ACCESS_LOG_FORMAT,
    OPT_MAX_REQUESTS,
    OPT_TIMEOUT,
    OPT_LOG_LEVEL,
    OPT_DEV,
    OPT_POOL
};

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
    {"port", required_argument, NULL, 'p'},
    {"host", required_argument, NULL, 'o'},
    {"env", required_argument, NULL, 'E'},
    {"dev", no_argument, NULL, OPT_DEV},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"access-log-format", required_argument, NULL, OPT_ACCESS_LOG_FORMAT},
    {"max-requests", required_argument, NULL, OPT_MAX_REQUESTS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"pool", required_argument, NULL, OPT_POOL},
    {NULL, 0, NULL, 0},
};

void cli_usage(FILE *out)
{
    fputs("Usage: pagid [OPTIONS] [APP]\n"
          "Serve a PAGI application from a master process and pre-forked workers.\n"
          "APP (a PAGI FILE.pl, a PSGI FILE.psgi or any -a SPEC) is the same as -a APP.\n"
          "\n"
          "Configuration:\n"
          "  -c, --config FILE    read the configuration from FILE (YAML, see pagid.yaml(5))\n"
          "  -t, --test           check the configuration and load the apps, report every "
          "error and exit\n"
          "  -T, --dump-config    check it like -t, then print the effective configuration "
          "as YAML\n"
          "\n"
          "Listening:\n"
          "  -l, --listen ADDR    listen on HOST:PORT, [V6]:PORT, :PORT (every address), "
          "PORT (127.0.0.1)\n"
          "                       or unix:/PATH; repeatable, replaces the file's list;\n"
          "                       https://HOST:PORT is a TLS listener (needs --cert and --key)\n"
          "  -o, --host HOST      with -p: listen on HOST (default 127.0.0.1)\n"
          "  -p, --port PORT      with -o: listen on PORT (default 8080); -o/-p add to -l\n"
          "      --cert FILE      the certificate (PEM, leaf first, then its chain) of the "
          "https:// listeners\n"
          "      --key FILE       its private key (PEM; read as root before privileges are "
          "dropped)\n"
          "\n"
          "The app:\n"
          "  -a, --app SPEC       the app: hello, echo, demo, pubsub, static:DIR, a module "
          "PATH.so[:ARG],\n"
          "                       a PAGI Perl app FILE.pl or a PSGI app FILE.psgi\n"
          "  -e CODE              the app is Perl CODE returning a PAGI code reference (like "
          "perl -e)\n"
          "  -M MODULE[=ARGS]     use MODULE before -e's CODE (repeatable, like perl -M)\n"
          "  -I, --perl-lib DIR   add DIR to a Perl app's @INC (repeatable)\n"
          "  -E, --env MODE       set PAGI_ENV (and PLACK_ENV for PSGI apps) to MODE; "
          "'development'\n"
          "                       is --dev (default: production)\n"
          "      --dev            development: 1 worker, reload when the app or its modules "
          "change,\n"
          "                       access log and readable log lines on the terminal, -D's "
          "checks\n"
          "      --preload, --no-preload  load the apps once before the workers fork (a zygote "
          "per\n"
          "                       generation), or in each worker; replaces the file's preload\n"
          "  -D, --debug          debug mode: check the apps' use of the C interface (stale "
          "handles,\n"
          "                       misuse) and warn of callbacks holding the loop over 100 ms\n"
          "\n"
          "Processes and limits:\n"
          "  -w, --workers N      worker processes: a number, 'auto' (one per CPU) or 0 "
          "(single process, no master)\n"
          "      --pool N         a PSGI app's worker pool: N processes run the app (0: none, "
          "on the\n"
          "                       workers' loops; default two per CPU); Starman's --workers; "
          "replaces\n"
          "                       the file's worker_pool.processes\n"
          "  -u, --user USER[:GROUP] run the workers as USER (and GROUP, else USER's own) when "
          "started as root;\n"
          "                       replaces the file's user and group; '-u root' keeps root\n"
          "      --max-requests N a worker is replaced after N requests (max_requests)\n"
          "      --timeout SECONDS  close a keep-alive connection idle this long between "
          "requests\n"
          "                       (timeouts.keepalive; pagi-server's --timeout)\n"
          "\n"
          "Logging:\n"
          "      --access-log FILE  write the access log to FILE, '-' for standard error\n"
          "      --access-log-format FORMAT  combined (default), clf, json or a custom format\n"
          "      --log-level LEVEL  error, warn, info (default) or debug (error_log.level)\n"
          "\n"
          "Control:\n"
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
          ", app " CONFIG_DEFAULT_APP ").\n"
          "pagid(8) maps pagi-server's and plackup's options to these.\n",
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
        int ch = getopt_long(argc, argv, ":c:tl:w:a:vhI:VTs:u:Dp:o:E:e:M:", long_options, NULL);
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
        case 'p':
            o->port = optarg;
            break;
        case 'o':
            o->host = optarg;
            break;
        case 'E':
            o->env = optarg;
            break;
        case 'e':
            o->eval = optarg;
            break;
        case OPT_DEV:
            o->dev = 1;
            break;
        case OPT_ACCESS_LOG:
            o->access_log = optarg;
            break;
        case OPT_ACCESS_LOG_FORMAT:
            o->access_log_format = optarg;
            break;
        case OPT_MAX_REQUESTS:
            o->max_requests = optarg;
            break;
        case OPT_TIMEOUT:
            o->timeout = optarg;
            break;
        case OPT_LOG_LEVEL:
            o->log_level = optarg;
            break;
        case OPT_POOL: {
            /* Checked here, as -s is: a number is a number in any config. */
            char *end;
            errno = 0;
            long n = strtol(optarg, &end, 10);
            if (!*optarg || *end || errno || n < 0 || n > CONFIG_POOL_MAX_PROCESSES) {
                cli_options_free(o);
                fprintf(err,
                        "pagid: --pool: expected a number of pool processes from 0 (no pool) to "
                        "%d, not '%s'\nTry 'pagid --help' for more information.\n",
                        CONFIG_POOL_MAX_PROCESSES, optarg);
                return -1;
            }
            o->pool = optarg;
            o->pool_processes = (int)n;
            break;
        }
        case OPT_KEY:
            o->key = optarg;
            break;
        case 'P':
        case 'N':
            o->preload = ch == 'P' ? 1 : -1;
            break;
        case 'I':
        case 'M': {
            const char ***list = ch == 'I' ? &o->perl_libs : &o->modules;
            size_t *n = ch == 'I' ? &o->n_perl_libs : &o->n_modules;
            const char **v = realloc(*list, (*n + 1) * sizeof *v);
            if (!v) {
                fprintf(err, "pagid: out of memory\n");
                cli_options_free(o);
                return -1;
            }
            v[(*n)++] = optarg;
            *list = v;
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
    /* `pagid app.pl`, as pagi-server and plackup take it: one app. */
    if (optind < argc && !o->app && !o->eval)
        o->app = argv[optind++];
    if (optind < argc) {
        cli_options_free(o);
        return usage_error(err, "an app is already given; unexpected argument", argv[optind],
                           strlen(argv[optind]));
    }
    if (o->eval && o->app) {
        cli_options_free(o);
        return usage_error(err, "-e cannot be combined with an app", o->app, strlen(o->app));
    }
    if (o->n_modules && !o->eval) {
        cli_options_free(o);
        return usage_error(err, "-M is for -e's code; an app file says", "use MODULE", 10);
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
    free(o->modules);
    o->modules = NULL;
    o->n_modules = 0;
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
    /* A bare PORT on the command line is loopback, as the default address
     * and -p are ("-l :PORT" or "*:PORT" says every address). */
    char local[32];
    if (*addr && strlen(addr) <= 5 && strspn(addr, "0123456789") == strlen(addr)) {
        snprintf(local, sizeof local, "127.0.0.1:%s", addr);
        addr = local;
    }
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

    char hostport[300];
    const char *dev_listen = cli_dev_listen_spec(o, hostport, sizeof hostport);
    if (o->n_listens > 0 || dev_listen) {
        config_clear_listens(c);
        for (size_t i = 0; i < o->n_listens; i++)
            errors += add_cli_listen(o, c, o->listens[i], err);
        if (dev_listen && config_add_listen(c, dev_listen, &msg) < 0) {
            fprintf(err, "pagid: -o/-p: invalid listen address '%s': %s\n", dev_listen, msg);
            errors++;
        }
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
    errors += cli_dev_apply(o, c, err);
    if (config_finalize(c, err) < 0)
        errors++;
    else
        errors += listeners_check_overlap(c, err); /* pagid -t, start and reload alike */
    if (errors == 0 && (set_perl_lib_env(o, c) < 0 || cli_dev_set_env(o, c) < 0)) {
        fprintf(err, "pagid: out of memory\n");
        errors++;
    }
    return errors;
}

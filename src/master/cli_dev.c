/*
 * cli_dev.c - the options a Perl developer brings from pagi-server and
 * plackup (-o/-p, --access-log, --max-requests, --timeout, --log-level,
 * -e/-M, -E, --dev) and Starman (--pool, its --workers), turned into the
 * same config keys the YAML sets.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/access_format.h"
#include "common/buf.h"

int cli_dev_mode(const cli_options *o)
{
    return o->dev || (o->env && strcmp(o->env, "development") == 0);
}

const char *cli_dev_listen_spec(const cli_options *o, char *out, size_t len)
{
    if (!o->host && !o->port)
        return NULL;
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    const char *port = o->port ? o->port : "8080";
    /* An IPv6 address as pagi-server takes it (-o ::1) needs brackets here. */
    int v6 = strchr(host, ':') && host[0] != '[';
    snprintf(out, len, "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    return out;
}

static int set_string(char **field, const char *value, FILE *err)
{
    char *copy = value ? strdup(value) : NULL;
    if (value && !copy) {
        fprintf(err, "pagid: out of memory\n");
        return 1;
    }
    free(*field);
    *field = copy;
    return 0;
}

static int parse_level(const char *s, log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    if (strcmp(s, "warning") == 0) { /* pagi-server's docs say both */
        *out = LOG_LVL_WARN;
        return 0;
    }
    return -1;
}

/* The -e app file: made once per process (a reload reads it again), removed
 * when the process that made it exits (not by the workers it forked). */
static char eval_dir[256], eval_file[300];
static pid_t eval_owner;

static void remove_eval_file(void)
{
    if (eval_owner != getpid() || !eval_file[0])
        return;
    unlink(eval_file);
    rmdir(eval_dir);
}

/* `-MFoo` is `use Foo;`, `-MFoo=a,b` is `use Foo split(/,/, q{a,b});`, and
 * `-M-Foo` is `no Foo;`, as perl(1) has them. */
static int append_module(buf *b, const char *m)
{
    const char *verb = "use";
    if (*m == '-') {
        verb = "no";
        m++;
    }
    const char *eq = strchr(m, '=');
    if (!eq)
        return buf_printf(b, "%s %s;\n", verb, m);
    return buf_printf(b, "%s %.*s split(/,/, q\x01%s\x01);\n", verb, (int)(eq - m), m, eq + 1);
}

/*
 * Write -M's modules and -e's code to a file the workers load like any app
 * file (readable by the workers' user: the code is on the command line
 * anyway). A `#line` directive makes Perl's messages say "-e line N".
 */
static const char *write_eval_app(const cli_options *o, FILE *err)
{
    if (eval_file[0])
        return eval_file;
    const char *tmp = getenv("TMPDIR");
    snprintf(eval_dir, sizeof eval_dir, "%s/pagid-e-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(eval_dir) || chmod(eval_dir, 0711) < 0) {
        fprintf(err, "pagid: -e: cannot make a directory for the code: %s\n", strerror(errno));
        eval_dir[0] = '\0';
        return NULL;
    }
    snprintf(eval_file, sizeof eval_file, "%s/eval.pl", eval_dir);
    buf b = BUF_INIT;
    int rc = buf_printf(&b, "#line 1 \"-M\"\n");
    for (size_t i = 0; i < o->n_modules; i++)
        rc |= append_module(&b, o->modules[i]);
    rc |= buf_printf(&b, "#line 1 \"-e\"\n%s\n", o->eval);
    FILE *f = rc == 0 ? fopen(eval_file, "w") : NULL;
    int ok = f && fwrite(buf_head(&b), 1, buf_size(&b), f) == buf_size(&b);
    if (f && fclose(f) != 0)
        ok = 0;
    buf_free(&b);
    if (!ok || chmod(eval_file, 0644) < 0) {
        fprintf(err, "pagid: -e: cannot write %s: %s\n", eval_file, strerror(errno));
        unlink(eval_file);
        rmdir(eval_dir);
        eval_file[0] = '\0';
        return NULL;
    }
    eval_owner = getpid();
    atexit(remove_eval_file);
    return eval_file;
}

/*
 * --pool N: the pool's processes (worker_pool.processes, top-level or the
 * app's: one pool serves every PSGI app of the config, mounted ones too),
 * whatever app the file or -a named (-a resets the file's pool; its
 * queue_limit and timeout stay otherwise). Only PSGI apps run whole in a
 * pool: a PAGI app's pool needs its handlers file, which only the YAML
 * names. 0, or 1 after saying why.
 */
static int apply_pool(const cli_options *o, pagid_config *c, FILE *err)
{
    if (!config_has_psgi_app(c)) {
        fprintf(err,
                "pagid: --pool: the app '%s' is not a PSGI app (FILE.psgi), nor is any mounted "
                "one; only PSGI apps run in a worker pool sized by --pool (a PAGI app's pool is "
                "the YAML's worker_pool: {processes: N, handlers: FILE})\n",
                c->app ? c->app : "");
        return 1;
    }
    if (c->workers == 0 && o->pool_processes > 0) {
        fprintf(err,
                "pagid: --pool %d: -w 0 runs a single process without a master, and so "
                "without a worker pool\n",
                o->pool_processes);
        return 1;
    }
    if (!c->worker_pool.set) {
        c->worker_pool.queue_limit = CONFIG_POOL_DEFAULT_QUEUE;
        c->worker_pool.timeout = CONFIG_POOL_DEFAULT_TIMEOUT;
        c->worker_pool.set = 1;
    }
    c->worker_pool.processes = o->pool_processes;
    return 0;
}

int cli_dev_apply(const cli_options *o, pagid_config *c, FILE *err)
{
    int errors = 0;
    const char *msg = NULL;
    if (o->access_log) {
        /* "off" turns it off, as in the file; '-' is standard error. */
        errors += set_string(&c->access_log_path,
                             strcmp(o->access_log, "off") ? o->access_log : NULL, err);
        c->access_log_pos = (pagid_pos){0};
    }
    if (o->access_log_format) {
        access_format f;
        size_t off = 0;
        if (access_format_compile(&f, o->access_log_format, &msg, &off) < 0) {
            fprintf(err, "pagid: --access-log-format: %s (at offset %zu of '%s')\n", msg, off,
                    o->access_log_format);
            errors++;
        } else {
            access_format_free(&f); /* compiled to check it; each worker compiles its own */
            errors += set_string(&c->access_log_format, o->access_log_format, err);
        }
    }
    if (o->max_requests) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(o->max_requests, &end, 10);
        if (!*o->max_requests || *end || errno || o->max_requests[0] == '-') {
            fprintf(err, "pagid: --max-requests: expected a whole number, not '%s'\n",
                    o->max_requests);
            errors++;
        } else {
            c->max_requests = (size_t)n;
        }
    }
    if (o->timeout && config_parse_duration(o->timeout, &c->timeouts.keepalive) < 0) {
        fprintf(err, "pagid: --timeout: expected seconds or a duration (30, 500ms, 2m), not '%s'\n",
                o->timeout);
        errors++;
    }
    if (o->log_level && parse_level(o->log_level, &c->error_log_level) < 0) {
        fprintf(err,
                "pagid: --log-level: '%s' is not a level (expected debug, info, warn, error)\n",
                o->log_level);
        errors++;
    }
    if (o->eval) {
        const char *file = write_eval_app(o, err);
        if (!file)
            errors++;
        else if (config_set_app(c, file, &msg) < 0) {
            fprintf(err, "pagid: -e: %s\n", msg);
            errors++;
        }
    }
    if (cli_dev_mode(o)) {
        /* One worker (a reload is quick, logs are not interleaved), the
         * interface checks of -D, and each request on the terminal. */
        if (!o->workers)
            c->workers = 1;
        c->debug = 1;
        if (!c->access_log_path)
            errors += set_string(&c->access_log_path, "-", err);
    }
    if (o->pool)
        errors += apply_pool(o, c, err);
    return errors;
}

/* Does c serve a PSGI app, at the top or under a mount? */
static int serves_psgi(const pagid_config *c)
{
    if (c->app && config_perl_app_kind(c->app) == CONFIG_PERL_PSGI)
        return 1;
    for (size_t i = 0; i < c->n_mounts; i++)
        if (config_perl_app_kind(c->mounts[i].app) == CONFIG_PERL_PSGI)
            return 1;
    return 0;
}

/*
 * PAGI_ENV as pagi-server sets it: -E, else development under --dev, else
 * what the environment says, else production (pagid does not guess from a
 * terminal). PLACK_ENV, for PSGI apps: -E, else the environment's, else
 * the same mode, as plackup sets it.
 */
int cli_dev_set_env(const cli_options *o, const pagid_config *c)
{
    const char *have = getenv("PAGI_ENV");
    const char *mode = o->env            ? o->env
                       : cli_dev_mode(o) ? "development"
                       : have && *have   ? have
                                         : "production";
    if (setenv("PAGI_ENV", mode, 1) < 0)
        return -1;
    if (!serves_psgi(c))
        return 0;
    const char *plack = getenv("PLACK_ENV");
    if (!o->env && plack && *plack)
        return 0;
    return setenv("PLACK_ENV", mode, 1);
}

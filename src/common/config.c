/*
 * config.c - the configuration model: defaults, the value parsers (sizes,
 * durations, worker counts), mounts, app checks and finalize. Listen
 * addresses and their TLS are config_listen.c; the YAML walk that feeds
 * these lives in config_yaml.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config_suggest.h"
#include "strtab.h"

/* Anything longer is a typo, and a year keeps ev timers far from overflow. */
#define MAX_DURATION_SECONDS (365.0 * 24 * 3600)

void config_init_defaults(pagid_config *c)
{
    memset(c, 0, sizeof *c);
    c->workers = CONFIG_WORKERS_AUTO;
    c->preload = CONFIG_PRELOAD_AUTO;
    c->app = strdup(CONFIG_DEFAULT_APP);

    c->limits.max_connections = 10000;
    c->limits.max_request_line = 8 * 1024;
    c->limits.max_header_size = 32 * 1024;
    c->limits.max_header_count = 100;
    c->limits.max_body_size = 10 * 1024 * 1024;
    c->limits.max_ws_message_size = 1024 * 1024;
    c->limits.max_receive_queue = 1000;
    c->limits.max_receive_queue_size = 1024 * 1024;
    c->limits.http2_max_streams = 100;
    c->limits.http2_stream_window = 65535;
    c->limits.http2_connection_window = 1024 * 1024;
    c->limits.http2_max_resets = 100;
    c->limits.http2_max_open_files = 32;

    c->timeouts.header = 30;
    c->timeouts.idle = 60;
    c->timeouts.keepalive = 75;
    c->timeouts.request = 60;
    c->timeouts.response = 60; /* as PAGI::Server */
    c->timeouts.write = 60;
    c->timeouts.http2_window = CONFIG_TIMEOUT_UNSET; /* = write */
    c->timeouts.ws_queue = CONFIG_TIMEOUT_UNSET;     /* = write */
    c->timeouts.ws_idle = 0;
    c->timeouts.sse_idle = 0;
    c->timeouts.ws_close = 5;
    c->timeouts.shutdown = 30;
    c->timeouts.heartbeat = 10;
    c->timeouts.lifespan_startup = 30;

    c->high_watermark = 64 * 1024;
    c->low_watermark = 16 * 1024;

    c->access_log_path = NULL; /* off */
    c->access_log_format = strdup("combined");
    c->error_log_path = NULL; /* stderr */
    c->error_log_level = LOG_LVL_INFO;
    c->status_listen = NULL; /* off */
    c->status_path = strdup("/metrics");
    c->pubsub.backend = PUBSUB_BACKEND_LOCAL;
    c->pubsub.prefix = strdup("pagid:");
    c->pubsub.buffer = 1024 * 1024;
}

int config_parse_size(const char *s, size_t *out)
{
    /* strtoull would accept spaces, signs and "0x"; sizes are plain digits. */
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -1;
    unsigned long long mult = 1;
    if (*end) {
        switch (*end) {
        case 'k':
        case 'K':
            mult = 1ULL << 10;
            break;
        case 'm':
        case 'M':
            mult = 1ULL << 20;
            break;
        case 'g':
        case 'G':
            mult = 1ULL << 30;
            break;
        default:
            return -1;
        }
        if (end[1])
            return -1;
    }
    if (v > SIZE_MAX / mult)
        return -1;
    *out = (size_t)(v * mult);
    return 0;
}

int config_parse_duration(const char *s, double *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    /* Validate the number by hand: strtod also takes "inf", hex and exponents. */
    const char *p = s;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -1;
        while (isdigit((unsigned char)*p))
            p++;
    }
    char num[32];
    size_t n = (size_t)(p - s);
    if (n >= sizeof num)
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    double v = strtod(num, NULL);

    double mult;
    if (*p == '\0' || strcmp(p, "s") == 0)
        mult = 1;
    else if (strcmp(p, "ms") == 0)
        mult = 0.001;
    else if (strcmp(p, "m") == 0)
        mult = 60;
    else if (strcmp(p, "h") == 0)
        mult = 3600;
    else
        return -1;
    v *= mult;
    if (!(v <= MAX_DURATION_SECONDS))
        return -1;
    *out = v;
    return 0;
}

int config_parse_workers(const char *s, int *out, const char **msg)
{
    if (s && strcmp(s, "auto") == 0) {
        *out = CONFIG_WORKERS_AUTO;
        return 0;
    }
    if (!s || !isdigit((unsigned char)*s)) {
        *msg = "expected a number or 'auto'";
        return -1;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) {
        *msg = "expected a number or 'auto'";
        return -1;
    }
    if (errno == ERANGE || v > CONFIG_MAX_WORKERS) {
        *msg = "out of range (0..1024)";
        return -1;
    }
    *out = (int)v;
    return 0;
}

int config_set_app(pagid_config *c, const char *spec, const char **msg)
{
    if (!spec || !*spec) {
        *msg = "empty app spec";
        return -1;
    }
    char *s = strdup(spec);
    if (!s) {
        *msg = "out of memory";
        return -1;
    }
    free(c->app);
    c->app = s;
    config_static_opts_init(&c->app_static); /* the mapping form sets them after */
    /* So is its worker_pool: another app (-a) does not inherit the file's. */
    free(c->worker_pool.handlers);
    c->worker_pool = (pagid_pool){0};
    return 0;
}

static int mount_path_ok(const char *p, size_t len, const char **msg)
{
    if (len == 0 || p[0] != '/') {
        *msg = "must start with '/'";
        return -1;
    }
    if (len == 1) {
        *msg = "is the top-level app's place; mount under a longer path";
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '?' || p[i] == '#' || (unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
            *msg = "must not contain '?', '#' or control characters";
            return -1;
        }
    }
    /* Segments: the prefix is matched against decoded request paths, segment by segment. */
    for (size_t i = 1; i <= len;) {
        size_t j = i;
        while (j < len && p[j] != '/')
            j++;
        size_t n = j - i;
        if (n == 0 || (n == 1 && p[i] == '.') || (n == 2 && p[i] == '.' && p[i + 1] == '.')) {
            *msg = "must not contain empty, '.' or '..' segments";
            return -1;
        }
        i = j + 1;
    }
    return 0;
}

int config_add_mount(pagid_config *c, const char *path, const char *app,
                     const pagid_static_opts *opts, const char **msg)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--; /* "/static/" is "/static" */
    if (mount_path_ok(path, len, msg) < 0)
        return -1;
    if (!app || !*app) {
        *msg = "empty app spec";
        return -1;
    }
    /* By hash, not by a scan: a generated config may mount thousands. */
    int added;
    if (config_reserve_mounts(c, 1) < 0) {
        *msg = "out of memory";
        return -1;
    }
    if (!strtab_get(c->mount_paths, path, len, 1, &added)) {
        *msg = "out of memory";
        return -1;
    }
    if (!added) {
        *msg = "is mounted twice";
        return -1;
    }
    pagid_mount *m = &c->mounts[c->n_mounts];
    memset(m, 0, sizeof *m);
    m->path = strndup(path, len);
    m->app = strdup(app);
    if (!m->path || !m->app) {
        free(m->path);
        free(m->app);
        *msg = "out of memory";
        return -1;
    }
    if (opts)
        m->static_opts = *opts;
    else
        config_static_opts_init(&m->static_opts);
    c->n_mounts++;
    return 0;
}

int config_reserve_mounts(pagid_config *c, size_t more)
{
    if (!c->mount_paths && !(c->mount_paths = calloc(1, sizeof *c->mount_paths)))
        return -1;
    if (more > SIZE_MAX / 2 / sizeof *c->mounts - c->n_mounts)
        return -1;
    if (c->n_mounts + more > c->cap_mounts) {
        /* Doubling: growing by one entry would copy the array at every mount. */
        size_t cap = c->cap_mounts ? 2 * c->cap_mounts : 4;
        if (cap < c->n_mounts + more)
            cap = c->n_mounts + more;
        pagid_mount *v = realloc(c->mounts, cap * sizeof *v);
        if (!v)
            return -1;
        c->mounts = v;
        c->cap_mounts = cap;
    }
    return strtab_reserve(c->mount_paths, more);
}

static void config_clear_mounts(pagid_config *c)
{
    if (c->mount_paths) {
        strtab_free(c->mount_paths);
        free(c->mount_paths);
        c->mount_paths = NULL;
    }
    for (size_t i = 0; i < c->n_mounts; i++) {
        free(c->mounts[i].path);
        free(c->mounts[i].app);
    }
    free(c->mounts);
    c->mounts = NULL;
    c->n_mounts = c->cap_mounts = 0;
}

size_t config_module_path_len(const char *spec)
{
    /* The first ".so" that ends the spec or is followed by ':' ends the path. */
    for (const char *p = strstr(spec, ".so"); p; p = strstr(p + 1, ".so"))
        if (p[3] == '\0' || p[3] == ':')
            return (size_t)(p + 3 - spec);
    return 0;
}

int config_module_path(const char *spec, char *path, size_t size)
{
    size_t n = config_module_path_len(spec);
    if (n >= size)
        return -1;
    memcpy(path, spec, n);
    path[n] = '\0';
    return (int)n;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

int config_perl_app_kind(const char *spec)
{
    if (!spec)
        return 0;
    if (ends_with(spec, ".pl"))
        return CONFIG_PERL_PAGI;
    if (ends_with(spec, ".psgi"))
        return CONFIG_PERL_PSGI;
    return 0;
}

/* A spec as it may appear in a message: one line, no control bytes (a
 * folded YAML scalar can hold newlines, which would forge another line). */
static const char *one_line(const char *s, char *out, size_t outlen)
{
    size_t j = 0;
    for (; *s && j + 4 < outlen; s++)
        out[j++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
    if (*s) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
    return out;
}

int config_check_app(const char *spec, char *msg, size_t msglen)
{
    struct stat st;
    char shown[256];
    if (!spec || !*spec) {
        snprintf(msg, msglen, "empty app spec");
        return -1;
    }
    /* demo is accepted here; until it exists the app registry serves echo. */
    if (!strcmp(spec, "hello") || !strcmp(spec, "echo") || !strcmp(spec, "demo") ||
        !strcmp(spec, "pubsub"))
        return 0;
    if (strncmp(spec, "static:", 7) == 0) {
        const char *dir = spec + 7;
        if (!*dir) {
            snprintf(msg, msglen, "static app needs a directory (static:DIR)");
            return -1;
        }
        if (stat(dir, &st) < 0) {
            snprintf(msg, msglen, "static directory '%s': %s", one_line(dir, shown, sizeof shown),
                     strerror(errno));
            return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(msg, msglen, "static directory '%s' is not a directory",
                     one_line(dir, shown, sizeof shown));
            return -1;
        }
        return 0;
    }
    char path[4096];
    int mlen = config_module_path(spec, path, sizeof path);
    if (mlen < 0) {
        snprintf(msg, msglen, "app module path too long");
        return -1;
    }
    if (mlen) {
        if (stat(path, &st) < 0 || access(path, R_OK) < 0) {
            snprintf(msg, msglen, "app module '%s': %s", one_line(path, shown, sizeof shown),
                     strerror(errno));
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(msg, msglen, "app module '%s' is not a regular file",
                     one_line(path, shown, sizeof shown));
            return -1;
        }
        return 0;
    }
    if (config_perl_app_kind(spec)) {
#ifdef PAGID_WITH_PERL
        if (stat(spec, &st) < 0 || access(spec, R_OK) < 0) {
            snprintf(msg, msglen, "%s app '%s': %s",
                     config_perl_app_kind(spec) == CONFIG_PERL_PSGI ? "PSGI" : "Perl",
                     one_line(spec, shown, sizeof shown), strerror(errno));
            return -1;
        }
        return 0;
#else
        snprintf(msg, msglen, "Perl applications need pagid built with the Perl host");
        return -1;
#endif
    }
    /* `pagid /srv/www` (as one would run a static server): say how. */
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
        one_line(spec, shown, sizeof shown);
        snprintf(msg, msglen,
                 "app '%s' is a directory: to serve its files, use static:%s (an app is hello, "
                 "echo, demo, pubsub, static:DIR, a .so module, a PAGI app FILE.pl or a PSGI "
                 "app FILE.psgi)",
                 shown, shown);
        return -1;
    }
    static const char *const builtins[] = {"hello", "echo", "demo", "pubsub", NULL};
    const char *near = config_suggest_among(spec, strlen(spec), builtins);
    if (near)
        snprintf(msg, msglen, "unknown app '%s' (did you mean '%s'?)",
                 one_line(spec, shown, sizeof shown), near);
    else
        snprintf(msg, msglen,
                 "unknown app '%s' (expected hello, echo, demo, pubsub, static:DIR, a .so "
                 "module, a PAGI app FILE.pl or a PSGI app FILE.psgi)",
                 one_line(spec, shown, sizeof shown));
    return -1;
}

void config_report(const pagid_config *c, pagid_pos pos, FILE *err, const char *fmt, ...)
{
    va_list ap;
    const char *file = pos.file ? pos.file : c->source;
    if (file && pos.line)
        fprintf(err, "%s:%u:%u: ", file, pos.line, pos.col);
    else
        fputs("pagid: ", err);
    va_start(ap, fmt);
    vfprintf(err, fmt, ap);
    va_end(ap);
    fputc('\n', err);
}

int config_path_is_stderr(const char *path)
{
    return path && (!strcmp(path, "-") || !strcmp(path, "stderr") || !strcmp(path, "/dev/stderr"));
}

int config_msg_has_pos(const char *msg)
{
    const char *p = msg + strcspn(msg, ": \n");
    if (p == msg)
        return 0;
    for (int field = 0; field < 2; field++) {
        if (*p != ':' || !isdigit((unsigned char)p[1]))
            return 0;
        p++;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return p[0] == ':' && p[1] == ' ';
}

void config_static_opts_init(pagid_static_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cache_entries = CONFIG_STATIC_CACHE_ENTRIES;
    o->cache_bytes = CONFIG_STATIC_CACHE_BYTES;
    o->cache_valid = CONFIG_STATIC_CACHE_VALID;
}

int config_pool_default_processes(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n = 2 * (n < 1 ? 1 : n);
    return (int)(n > CONFIG_POOL_MAX_PROCESSES ? CONFIG_POOL_MAX_PROCESSES : n);
}

int config_has_psgi_app(const pagid_config *c)
{
    if (c->app && config_perl_app_kind(c->app) == CONFIG_PERL_PSGI)
        return 1;
    for (size_t i = 0; i < c->n_mounts; i++)
        if (config_perl_app_kind(c->mounts[i].app) == CONFIG_PERL_PSGI)
            return 1;
    return 0;
}

int config_finalize(pagid_config *c, FILE *err)
{
    const char *msg = NULL;
    if (!c->app || !c->access_log_format || !c->status_path || !c->pubsub.prefix) {
        fprintf(err, "pagid: out of memory\n");
        return -1;
    }
    if (c->pubsub.backend == PUBSUB_BACKEND_REDIS && !c->pubsub.url) {
        config_report(c, c->pubsub.backend_pos, err,
                      "'pubsub.backend: redis' needs 'pubsub.url' (redis://HOST:PORT/DB)");
        return -1;
    }
    /* nginx's rule: a group alone would leave the workers with the master's
     * user (root), which nobody asking for a group means. */
    if (c->group && !c->user) {
        config_report(c, c->group_pos, err,
                      "'group' needs 'user': set the user the workers run as (a group alone "
                      "would leave them with the master's user)");
        return -1;
    }
    /* The metrics must not be reachable on a normal listener: never share an address. */
    for (size_t i = 0; c->status_listen && i < c->n_listens; i++) {
        if (config_same_listen(&c->listens[i], c->status_listen)) {
            if (c->listens[i].status)
                break; /* finalized before */
            config_report(c, c->status_listen->pos, err,
                          "status.listen %s is also a normal listener", c->status_listen->spec);
            return -1;
        }
    }
    if (c->n_listens == 0 && config_add_listen(c, CONFIG_DEFAULT_LISTEN, &msg) < 0) {
        fprintf(err, "pagid: default listener %s: %s\n", CONFIG_DEFAULT_LISTEN, msg);
        return -1;
    }
    /* The status listener joins the list (after the default one), flagged, so it is
     * bound, inherited and reused on reload exactly like the others. */
    if (c->status_listen && !(c->n_listens && c->listens[c->n_listens - 1].status)) {
        if (config_add_listen(c, c->status_listen->spec, &msg) < 0) {
            fprintf(err, "pagid: status.listen %s: %s\n", c->status_listen->spec, msg);
            return -1;
        }
        c->listens[c->n_listens - 1].status = 1;
        c->listens[c->n_listens - 1].pos = c->status_listen->pos;
    }
    if (c->timeouts.http2_window == CONFIG_TIMEOUT_UNSET)
        c->timeouts.http2_window = c->timeouts.write;
    if (c->timeouts.ws_queue == CONFIG_TIMEOUT_UNSET)
        c->timeouts.ws_queue = c->timeouts.write;
    if (c->workers == CONFIG_WORKERS_AUTO) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
            n = 1;
        if (n > CONFIG_MAX_WORKERS)
            n = CONFIG_MAX_WORKERS;
        c->workers = (int)n;
    }
    /* A PSGI app is synchronous: under a master every PSGI app of the
     * config, top-level or mounted, runs in the worker pool unless the
     * config says otherwise (worker_pool: {processes: 0} keeps them on the
     * workers' loops), so a slow handler never holds a worker's loop. With
     * -w 0 there is no pool (nobody supervises its processes). */
    if (!c->worker_pool.set && c->workers != 0 && config_has_psgi_app(c)) {
        free(c->worker_pool.handlers);
        c->worker_pool = (pagid_pool){.processes = config_pool_default_processes(),
                                      .queue_limit = CONFIG_POOL_DEFAULT_QUEUE,
                                      .timeout = CONFIG_POOL_DEFAULT_TIMEOUT};
    }
    return 0;
}

void config_free(pagid_config *c)
{
    config_clear_listens(c);
    config_clear_mounts(c);
    free(c->source);
    for (size_t i = 0; i < c->n_pos_files; i++)
        free(c->pos_files[i]);
    free(c->pos_files);
    free(c->app);
    free(c->perl_lib);
    free(c->worker_pool.handlers);
    free(c->access_log_path);
    free(c->access_log_format);
    free(c->error_log_path);
    if (c->status_listen)
        config_listen_free(c->status_listen);
    free(c->status_listen);
    free(c->status_path);
    free(c->pubsub.url);
    free(c->pubsub.prefix);
    for (size_t i = 0; i < c->pubsub.n_allowed_origins; i++)
        free(c->pubsub.allowed_origins[i]);
    free(c->pubsub.allowed_origins);
    free(c->tls_groups);
    for (size_t i = 0; i < c->n_shared_dicts; i++)
        free(c->shared_dicts[i].name);
    free(c->shared_dicts);
    free(c->pid_file);
    free(c->user);
    free(c->group);
    memset(c, 0, sizeof *c);
}

/* A Perl app compiles its file and modules in each process that loads it;
 * a .so's code is shared through the page cache already (a zygote would
 * save only its relocated data), so only `preload: true` preloads it. */
static int app_has_code(const char *spec)
{
    return config_perl_app_kind(spec) != 0;
}

int config_preload_wanted(const pagid_config *c)
{
    if (c->preload != CONFIG_PRELOAD_AUTO)
        return c->preload;
    if (app_has_code(c->app))
        return 1;
    for (size_t i = 0; i < c->n_mounts; i++)
        if (app_has_code(c->mounts[i].app))
            return 1;
    return 0;
}

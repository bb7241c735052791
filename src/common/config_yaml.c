/*
 * config_yaml.c - walks a YAML document into a pagid_config against tables
 * of known keys (name, handler, offset), so every problem is reported with
 * its FILE:LINE:COLUMN and the walk carries on; an unknown name gets the
 * closest valid one, a value set twice names where it was first set.
 * Reading files and parsing is config_yaml_load.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "access_format.h"
#include "config_suggest.h"

#include "config_yaml_int.h"

void report_at(load_ctx *x, size_t line, size_t col, const char *fmt, ...)
{
    va_list ap;
    fprintf(x->err, "%s:%zu:%zu: ", x->st->files[x->file].name, line, col);
    va_start(ap, fmt);
    vfprintf(x->err, fmt, ap);
    va_end(ap);
    fputc('\n', x->err);
    x->st->errors++;
}

src_pos node_pos(const load_ctx *x, const ynode *n)
{
    src_pos at = {x->file, n->line + 1, n->col + 1};
    return at;
}

pagid_pos keep_pos(load_ctx *x, const ynode *n)
{
    pagid_pos pos = {(unsigned)n->line + 1, (unsigned)n->col + 1, NULL};
    if (x->file == 0)
        return pos; /* the main file: c->source */
    /* An included file: its name, kept once in the config. */
    const char *name = x->st->files[x->file].name;
    pagid_config *c = x->c;
    for (size_t i = 0; i < c->n_pos_files; i++)
        if (!strcmp(c->pos_files[i], name)) {
            pos.file = c->pos_files[i];
            return pos;
        }
    char **grown = realloc(c->pos_files, (c->n_pos_files + 1) * sizeof *grown);
    char *copy = strdup(name);
    if (grown)
        c->pos_files = grown;
    if (!grown || !copy) {
        free(copy);
        return (pagid_pos){0}; /* out of memory: no position rather than a wrong one */
    }
    c->pos_files[c->n_pos_files++] = copy;
    pos.file = copy;
    return pos;
}

const char *pos_text(const load_state *st, src_pos at, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s:%zu:%zu", st->files[at.file].name, at.line, at.col);
    return out;
}

/* Make user-supplied text safe to echo on one line of stderr. */
const char *printable_text(const char *text, size_t len, char *out, size_t outlen)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t j = 0;
    for (size_t i = 0; i < len && j + 4 < outlen; i++)
        out[j++] = (s[i] >= 0x20 && s[i] != 0x7f) ? (char)s[i] : '?';
    if (len && j + 4 >= outlen) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
    return out;
}

const char *printable(const ynode *n, char *out, size_t outlen)
{
    return printable_text(n->value, n->len, out, outlen);
}

const char *kind_name(const ynode *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return "a single value";
    }
}

/* The scalar's text, or NULL after reporting why it cannot be one. */
const char *scalar(load_ctx *x, const ynode *n, const char *path)
{
    if (n->type != YAML_SCALAR_NODE) {
        report(x, n, "'%s' must be a single value, not %s", path, kind_name(n));
        return NULL;
    }
    if (is_null(n)) {
        report(x, n, "'%s' needs a value", path);
        return NULL;
    }
    if (n->flags & YNODE_HAS_NUL) {
        report(x, n, "'%s' contains a NUL byte", path);
        return NULL;
    }
    return n->value;
}

static void set_size(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    size_t v;
    char shown[80];
    if (!s)
        return;
    if (config_parse_size(s, &v) < 0) {
        report(x, n, "invalid size '%s' for '%s' (expected e.g. 512, 64k, 10m, 1g)",
               printable(n, shown, sizeof shown), path);
        return;
    }
    if (v < k->min) {
        report(x, n, "'%s' must be at least %zu", path, k->min);
        return;
    }
    if (v > k->max) {
        report(x, n, "'%s' must be at most %zu", path, k->max);
        return;
    }
    *FIELD(x, k, size_t) = v;
    /* Kept as positions: the two may come from different files, checked at the end. */
    if (k->off == offsetof(pagid_config, high_watermark)) {
        x->st->has_high = 1;
        x->st->high_at = node_pos(x, n);
    } else if (k->off == offsetof(pagid_config, low_watermark)) {
        x->st->has_low = 1;
        x->st->low_at = node_pos(x, n);
    }
}

static void set_count(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return;
    size_t i = 0;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == 0 || s[i]) {
        report(x, n, "invalid number '%s' for '%s' (expected a whole number)",
               printable(n, shown, sizeof shown), path);
        return;
    }
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE || v > k->max) {
        report(x, n, "'%s' must be at most %zu", path, k->max);
        return;
    }
    if (v < k->min) {
        report(x, n, "'%s' must be at least %zu", path, k->min);
        return;
    }
    *FIELD(x, k, size_t) = (size_t)v;
}

static void set_duration(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    char shown[80];
    double v;
    if (!s)
        return;
    if (config_parse_duration(s, &v) < 0) {
        report(x, n,
               "invalid duration '%s' for '%s' (expected e.g. 500ms, 30s, 5m, 1h, at most "
               "1 year; 0 disables)",
               printable(n, shown, sizeof shown), path);
        return;
    }
    *FIELD(x, k, double) = v;
}

/* The position kept for a string key, when checks after loading need it. */
static pagid_pos *pos_of(load_ctx *x, const key_def *k)
{
    pagid_config *c = x->c;
    if (k->off == offsetof(pagid_config, user))
        return &c->user_pos;
    if (k->off == offsetof(pagid_config, group))
        return &c->group_pos;
    if (k->off == offsetof(pagid_config, pid_file))
        return &c->pid_file_pos;
    if (k->off == offsetof(pagid_config, error_log_path))
        return &c->error_log_pos;
    if (k->off == offsetof(pagid_config, access_log_path))
        return &c->access_log_pos;
    return NULL;
}

/* Optional strings: null unsets them, and so does null_word (e.g. "off"). */
static void set_string_or(load_ctx *x, const key_def *k, const ynode *n, const char *path,
                          const char *null_word)
{
    char **field = FIELD(x, k, char *);
    pagid_pos *pos = pos_of(x, k);
    if (n->type == YAML_SCALAR_NODE &&
        (is_null(n) || (null_word && !strcmp(n->value, null_word)))) {
        free(*field);
        *field = NULL;
        if (pos)
            *pos = (pagid_pos){0};
        return;
    }
    const char *s = scalar(x, n, path);
    if (!s)
        return;
    char *dup = strdup(s);
    if (!dup) {
        report(x, n, "out of memory");
        return;
    }
    free(*field);
    *field = dup;
    if (pos)
        *pos = keep_pos(x, n);
}

static void set_string(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    set_string_or(x, k, n, path, NULL);
}

static void set_access_path(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    set_string_or(x, k, n, path, "off");
}

static void set_error_path(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    set_string_or(x, k, n, path, "stderr");
}

static void set_access_format(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return;
    /* Compile it now, so a bad atom is reported at its own column, not when a worker starts. */
    access_format f;
    const char *msg = NULL;
    size_t off = 0;
    if (access_format_compile(&f, s, &msg, &off) < 0) {
        static const char *const names[] = {"clf", "combined", "json", NULL};
        const char *near = strchr(s, '%') ? NULL : config_suggest_among(s, strlen(s), names);
        if (near) { /* a misspelt name, not a custom format */
            report(x, n, "invalid access log format '%s' (did you mean '%s'?)",
                   printable(n, shown, sizeof shown), near);
            return;
        }
        int quoted = n->style != YAML_PLAIN_SCALAR_STYLE;
        int one_line = (n->flags & YNODE_ONE_LINE) && !memchr(s, '\\', off);
        size_t col = n->col + 1 + (one_line ? off + (size_t)quoted : 0);
        report_at(x, n->line + 1, col, "invalid access log format '%s' (%s)",
                  printable(n, shown, sizeof shown), msg);
        return;
    }
    access_format_free(&f);
    set_string(x, k, n, path);
}

static void set_status_listen(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    pagid_listen **field = &x->c->status_listen;
    if (n->type == YAML_SCALAR_NODE && (is_null(n) || !strcmp(n->value, "off"))) {
        if (*field)
            config_listen_free(*field);
        free(*field);
        *field = NULL;
        return;
    }
    const char *s = scalar(x, n, path);
    const char *msg;
    char shown[80];
    if (!s)
        return;
    pagid_listen l;
    if (config_parse_listen(s, &l, &msg) < 0) {
        report(x, n, "invalid listen address '%s' for '%s': %s", printable(n, shown, sizeof shown),
               path, msg);
        return;
    }
    pagid_listen *copy = malloc(sizeof *copy);
    if (!copy) {
        config_listen_free(&l);
        report(x, n, "out of memory");
        return;
    }
    *copy = l;
    copy->pos = keep_pos(x, n);
    if (*field)
        config_listen_free(*field);
    free(*field);
    *field = copy;
}

static void set_status_path(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return;
    int ok = s[0] == '/';
    for (const char *p = s; ok && *p; p++)
        ok = (unsigned char)*p > 0x20 && *p != 0x7f && *p != '?' && *p != '#';
    if (!ok) {
        report(x, n,
               "invalid '%s' '%s' (expected a path such as /metrics: starts with '/', "
               "no spaces, '?' or '#')",
               path, printable(n, shown, sizeof shown));
        return;
    }
    set_string(x, k, n, path);
}

static void set_level(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    static const char *const names[] = {"error", "warn", "info", "debug", NULL};
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return;
    for (size_t i = 0; names[i]; i++) {
        if (!strcmp(s, names[i])) {
            x->c->error_log_level = (log_level)i;
            return;
        }
    }
    const char *near = config_suggest_among(s, strlen(s), names);
    if (near)
        report(x, n, "invalid log level '%s' (did you mean '%s'?)",
               printable(n, shown, sizeof shown), near);
    else
        report(x, n, "invalid log level '%s' (expected error, warn, info or debug)",
               printable(n, shown, sizeof shown));
}

static void set_workers(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    const char *msg;
    char shown[80];
    if (!s)
        return;
    if (config_parse_workers(s, &x->c->workers, &msg) < 0) {
        static const char *const names[] = {"auto", NULL};
        const char *near = config_suggest_among(s, strlen(s), names);
        if (near)
            report(x, n, "invalid workers '%s': %s (did you mean '%s'?)",
                   printable(n, shown, sizeof shown), msg, near);
        else
            report(x, n, "invalid workers '%s': %s", printable(n, shown, sizeof shown), msg);
    }
}

static void walk_mapping(load_ctx *x, const ynode *n, const key_def *table, const char *section);

static void set_section(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    if (is_null(n)) /* "limits:" with nothing under it */
        return;
    if (n->type != YAML_MAPPING_NODE) {
        report(x, n, "'%s' must be a mapping, not %s", path, kind_name(n));
        return;
    }
    walk_mapping(x, n, k->sub, path);
}

#define SIZE_KEY(name, field, lo, hi)                                                              \
    {                                                                                              \
#name, set_size, offsetof(pagid_config, field), NULL, (lo), (hi)                           \
    }
#define COUNT_KEY(name, field, lo, hi)                                                             \
    {                                                                                              \
#name, set_count, offsetof(pagid_config, field), NULL, (lo), (hi)                          \
    }
#define DURATION_KEY(name)                                                                         \
    {                                                                                              \
#name, set_duration, offsetof(pagid_config, timeouts.name), NULL, 0, 0                     \
    }
#define STRING_KEY(name, set, field)                                                               \
    {                                                                                              \
#name, set, offsetof(pagid_config, field), NULL, 0, 0                                      \
    }
#define SECTION_KEY(name, table)                                                                   \
    {                                                                                              \
#name, set_section, 0, table, 0, 0                                                         \
    }

static const key_def limits_keys[] = {
    COUNT_KEY(max_connections, limits.max_connections, 1, 10000000),
    SIZE_KEY(max_request_line, limits.max_request_line, 16, SIZE_MAX),
    SIZE_KEY(max_header_size, limits.max_header_size, 64, SIZE_MAX),
    COUNT_KEY(max_header_count, limits.max_header_count, 1, 100000),
    SIZE_KEY(max_body_size, limits.max_body_size, 0, SIZE_MAX),
    /* bounded so the limit arithmetic (inflate room, wire slack) cannot wrap */
    SIZE_KEY(max_ws_message_size, limits.max_ws_message_size, 1, (size_t)1 << 40),
    COUNT_KEY(max_receive_queue, limits.max_receive_queue, 1, 10000000),
    SIZE_KEY(max_receive_queue_size, limits.max_receive_queue_size, 1, SIZE_MAX),
    /* RFC 9113 6.5.2 / 6.9.1: a window is at most 2^31-1 */
    COUNT_KEY(http2_max_streams, limits.http2_max_streams, 1, 100000),
    SIZE_KEY(http2_stream_window, limits.http2_stream_window, 1024, 2147483647),
    SIZE_KEY(http2_connection_window, limits.http2_connection_window, 65535, 2147483647),
    COUNT_KEY(http2_max_resets, limits.http2_max_resets, 1, 1000000),
    COUNT_KEY(http2_max_open_files, limits.http2_max_open_files, 1, 100000),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def timeouts_keys[] = {
    DURATION_KEY(header),
    DURATION_KEY(idle),
    DURATION_KEY(keepalive),
    DURATION_KEY(request),
    DURATION_KEY(response),
    DURATION_KEY(write),
    DURATION_KEY(http2_window),
    DURATION_KEY(ws_queue),
    DURATION_KEY(ws_idle),
    DURATION_KEY(sse_idle),
    DURATION_KEY(ws_close),
    DURATION_KEY(shutdown),
    DURATION_KEY(heartbeat),
    DURATION_KEY(lifespan_startup),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def flow_keys[] = {
    SIZE_KEY(high_watermark, high_watermark, 1, SIZE_MAX),
    SIZE_KEY(low_watermark, low_watermark, 0, SIZE_MAX),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def access_log_keys[] = {
    STRING_KEY(path, set_access_path, access_log_path),
    STRING_KEY(format, set_access_format, access_log_format),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def error_log_keys[] = {
    STRING_KEY(path, set_error_path, error_log_path),
    STRING_KEY(level, set_level, error_log_level),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def status_keys[] = {
    STRING_KEY(listen, set_status_listen, status_listen),
    STRING_KEY(path, set_status_path, status_path),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def pubsub_keys[] = {
    STRING_KEY(backend, set_pubsub_backend, pubsub.backend),
    STRING_KEY(url, set_pubsub_url, pubsub.url),
    STRING_KEY(prefix, set_pubsub_prefix, pubsub.prefix),
    STRING_KEY(allowed_origins, set_pubsub_origins, pubsub.allowed_origins),
    /* 0: nothing kept while the backend is down */
    SIZE_KEY(buffer, pubsub.buffer, 0, (size_t)1 << 34),
    {NULL, NULL, 0, NULL, 0, 0},
};

/* Server-wide TLS defaults; a listener's own tls mapping overrides them. */
static const key_def tls_keys[] = {
    STRING_KEY(groups, set_tls_groups, tls_groups),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def top_keys[] = {
    STRING_KEY(listen, set_listen, listens),
    STRING_KEY(workers, set_workers, workers),
    COUNT_KEY(max_requests, max_requests, 0, SIZE_MAX),
    STRING_KEY(preload, set_preload, preload),
    STRING_KEY(debug, set_debug, debug),
    STRING_KEY(app, set_app, app),
    STRING_KEY(mounts, set_mounts, mounts),
    STRING_KEY(worker_pool, set_worker_pool, worker_pool),
    SECTION_KEY(limits, limits_keys),
    SECTION_KEY(timeouts, timeouts_keys),
    SECTION_KEY(flow_control, flow_keys),
    SECTION_KEY(access_log, access_log_keys),
    SECTION_KEY(error_log, error_log_keys),
    SECTION_KEY(status, status_keys),
    SECTION_KEY(pubsub, pubsub_keys),
    SECTION_KEY(tls, tls_keys),
    STRING_KEY(shared_dicts, set_shared_dicts, shared_dicts),
    STRING_KEY(pid_file, set_string, pid_file),
    STRING_KEY(user, set_string, user),
    STRING_KEY(group, set_string, group),
    {"include", set_include, 0, NULL, 0, 0},
    {NULL, NULL, 0, NULL, 0, 0},
};

/*
 * The closest valid name for an unknown key of table into out ("" when none):
 * a near spelling at the same level, else (at the top level) the one
 * section key of that exact name, e.g. "timeouts.idle" for a bare "idle:".
 */
static const char *suggest_key(const key_def *table, const char *section, const char *name,
                               size_t len, char *out, size_t outlen)
{
    config_suggest s;
    config_suggest_init(&s, name, len);
    for (size_t i = 0; table[i].name; i++)
        config_suggest_add(&s, table[i].name);
    out[0] = '\0';
    if (config_suggest_best(&s)) {
        snprintf(out, outlen, "%s", config_suggest_best(&s));
        return out;
    }
    int found = 0;
    for (size_t i = 0; !section && table[i].name; i++) {
        for (const key_def *sub = table[i].sub; sub && sub->name; sub++) {
            if (config_edit_distance(name, len, sub->name, strlen(sub->name)) == 0) {
                snprintf(out, outlen, "%s.%s", table[i].name, sub->name);
                found++;
            }
        }
    }
    if (found != 1) /* "path" is in three sections: no guess */
        out[0] = '\0';
    return out;
}

static void report_unknown(load_ctx *x, const ynode *key, const key_def *table, const char *section)
{
    char shown[80], near[80], hint[100] = "";
    suggest_key(table, section, key->value, key->len, near, sizeof near);
    if (near[0])
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    if (section)
        report(x, key, "unknown key '%s' in '%s'%s", printable(key, shown, sizeof shown), section,
               hint);
    else
        report(x, key, "unknown key '%s'%s", printable(key, shown, sizeof shown), hint);
}

/* Sections merge key by key and lists append, across files; within one file
 * such a key is given once, like any other. */
static int merges_across_files(const key_def *k)
{
    return k->set == set_section || k->set == set_listen || k->set == set_mounts ||
           k->set == set_include;
}

static void report_duplicate(load_ctx *x, const ynode *key, const key_def *k, const char *section,
                             src_pos first)
{
    char where[POS_TEXT_MAX];
    pos_text(x->st, first, where, sizeof where);
    if (section)
        report(x, key, "duplicate key '%s' in '%s' (first set at %s)", k->name, section, where);
    else
        report(x, key, "duplicate key '%s' (first set at %s)", k->name, where);
}

/*
 * Note that key k is given at pair p of mapping map: 0 when that is its
 * first time, else -1 after reporting where it was first set. A single
 * value is looked up over the whole load (the main file and its includes);
 * a section or list only among the keys of this mapping before it.
 */
static int note_key(load_ctx *x, const key_def *k, const ynode *map, size_t p, const char *section)
{
    load_state *st = x->st;
    const ynode *key = key_at(x, map, p);
    if (merges_across_files(k)) {
        for (size_t q = 0; q < p; q++) {
            const ynode *other = key_at(x, map, q);
            if (other->type == YAML_SCALAR_NODE && other->len == key->len &&
                !memcmp(other->value, key->value, key->len)) {
                report_duplicate(x, key, k, section, node_pos(x, other));
                return -1;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < st->n_seen; i++) {
        if (st->seen[i].k == k) {
            report_duplicate(x, key, k, section, st->seen[i].at);
            return -1;
        }
    }
    key_seen *grown = realloc(st->seen, (st->n_seen + 1) * sizeof *grown);
    if (!grown) {
        report(x, key, "out of memory");
        return -1;
    }
    st->seen = grown;
    st->seen[st->n_seen].k = k;
    st->seen[st->n_seen].at = node_pos(x, key);
    st->n_seen++;
    return 0;
}

static void walk_mapping(load_ctx *x, const ynode *n, const key_def *table, const char *section)
{
    char path[64];
    for (size_t p = 0; p < n->len; p++) {
        const ynode *key = key_at(x, n, p), *val = value_at(x, n, p);
        if (key->type != YAML_SCALAR_NODE) {
            report(x, key, "keys must be plain names, not %s", kind_name(key));
            continue;
        }
        const char *name = key->value;
        size_t i = 0;
        while (table[i].name && (strcmp(table[i].name, name) || strlen(name) != key->len))
            i++;
        if (!table[i].name) {
            report_unknown(x, key, table, section);
            continue;
        }
        if (note_key(x, &table[i], n, p, section) < 0)
            continue; /* the first value stands */
        if (section)
            snprintf(path, sizeof path, "%s.%s", section, table[i].name);
        else
            snprintf(path, sizeof path, "%s", table[i].name);
        table[i].set(x, &table[i], val, path);
    }
}

void walk_top(load_ctx *x, const ynode *root)
{
    walk_mapping(x, root, top_keys, NULL);
}

/*
 * config_yaml.c - loads a YAML file into a pagid_config. The document is
 * walked against tables of known keys (name, handler, offset), so every
 * problem is reported with its FILE:LINE:COLUMN and the walk carries on.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "access_format.h"
#include "buf.h"

/* A config file is a few kilobytes; refuse to slurp something absurd. */
#define MAX_FILE_SIZE (16 * 1024 * 1024)
/* Our schema is 3 levels deep. libyaml's scanner is quadratic in nesting
 * depth, so a deep "[[[[..." would stall pagid -t for minutes: cap it. */
#define MAX_DEPTH 32

#include "config_yaml_int.h"

void report_at(load_ctx *x, size_t line, size_t col, const char *fmt, ...)
{
    va_list ap;
    fprintf(x->err, "%s:%zu:%zu: ", x->name, line, col);
    va_start(ap, fmt);
    vfprintf(x->err, fmt, ap);
    va_end(ap);
    fputc('\n', x->err);
    x->errors++;
}

pagid_pos node_pos(const yaml_node_t *n)
{
    return (pagid_pos){(unsigned)n->start_mark.line + 1, (unsigned)n->start_mark.column + 1};
}

/* Make a user-supplied key or value safe to echo on one line of stderr. */
const char *printable(const yaml_node_t *n, char *out, size_t outlen)
{
    const unsigned char *s = n->data.scalar.value;
    size_t len = n->data.scalar.length, j = 0;
    for (size_t i = 0; i < len && j + 4 < outlen; i++)
        out[j++] = (s[i] >= 0x20 && s[i] != 0x7f) ? (char)s[i] : '?';
    if (len && j + 4 >= outlen) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
    return out;
}

const char *kind_name(const yaml_node_t *n)
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

yaml_node_t *node_at(load_ctx *x, int index)
{
    return yaml_document_get_node(x->doc, index);
}

/* libyaml does not resolve tags: an empty or ~/null plain scalar is null. */
int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *v = (const char *)n->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* The scalar's text, or NULL after reporting why it cannot be one. */
const char *scalar(load_ctx *x, yaml_node_t *n, const char *path)
{
    if (n->type != YAML_SCALAR_NODE) {
        report(x, n, "'%s' must be a single value, not %s", path, kind_name(n));
        return NULL;
    }
    if (is_null(n)) {
        report(x, n, "'%s' needs a value", path);
        return NULL;
    }
    if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length) {
        report(x, n, "'%s' contains a NUL byte", path);
        return NULL;
    }
    return (const char *)n->data.scalar.value;
}

static void set_size(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
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
    if (k->off == offsetof(pagid_config, high_watermark))
        x->high_node = n;
    else if (k->off == offsetof(pagid_config, low_watermark))
        x->low_node = n;
}

static void set_count(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
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

static void set_duration(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
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
static void set_string_or(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path,
                          const char *null_word)
{
    char **field = FIELD(x, k, char *);
    pagid_pos *pos = pos_of(x, k);
    if (n->type == YAML_SCALAR_NODE &&
        (is_null(n) || (null_word && !strcmp((const char *)n->data.scalar.value, null_word)))) {
        free(*field);
        *field = NULL;
        if (pos)
            *pos = (pagid_pos){0, 0};
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
        *pos = node_pos(n);
}

static void set_string(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
{
    set_string_or(x, k, n, path, NULL);
}

static void set_access_path(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
{
    set_string_or(x, k, n, path, "off");
}

static void set_error_path(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
{
    set_string_or(x, k, n, path, "stderr");
}

static void set_access_format(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
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
        int quoted = n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        int one_line = n->start_mark.line == n->end_mark.line && !memchr(s, '\\', off);
        size_t col = n->start_mark.column + 1 + (one_line ? off + (size_t)quoted : 0);
        report_at(x, n->start_mark.line + 1, col, "invalid access log format '%s' (%s)",
                  printable(n, shown, sizeof shown), msg);
        return;
    }
    access_format_free(&f);
    set_string(x, k, n, path);
}

static void set_status_listen(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
{
    pagid_listen **field = &x->c->status_listen;
    if (n->type == YAML_SCALAR_NODE &&
        (is_null(n) || !strcmp((const char *)n->data.scalar.value, "off"))) {
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
    copy->pos = node_pos(n);
    if (*field)
        config_listen_free(*field);
    free(*field);
    *field = copy;
}

static void set_status_path(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
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

static void set_level(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcmp(s, names[i])) {
            x->c->error_log_level = (log_level)i;
            return;
        }
    }
    report(x, n, "invalid log level '%s' (expected error, warn, info or debug)",
           printable(n, shown, sizeof shown));
}

static void set_workers(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
{
    const char *s = scalar(x, n, path);
    const char *msg;
    char shown[80];
    if (!s)
        return;
    if (config_parse_workers(s, &x->c->workers, &msg) < 0)
        report(x, n, "invalid workers '%s': %s", printable(n, shown, sizeof shown), msg);
}

static void walk_mapping(load_ctx *x, yaml_node_t *n, const key_def *table, const char *section);

static void set_section(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path)
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
    SIZE_KEY(max_ws_message_size, limits.max_ws_message_size, 1, SIZE_MAX),
    COUNT_KEY(max_receive_queue, limits.max_receive_queue, 1, 10000000),
    {NULL, NULL, 0, NULL, 0, 0},
};

static const key_def timeouts_keys[] = {
    DURATION_KEY(header),
    DURATION_KEY(idle),
    DURATION_KEY(keepalive),
    DURATION_KEY(request),
    DURATION_KEY(write),
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

static const key_def top_keys[] = {
    STRING_KEY(listen, set_listen, listens),
    STRING_KEY(workers, set_workers, workers),
    COUNT_KEY(max_requests, max_requests, 0, SIZE_MAX),
    STRING_KEY(app, set_app, app),
    STRING_KEY(mounts, set_mounts, mounts),
    SECTION_KEY(limits, limits_keys),
    SECTION_KEY(timeouts, timeouts_keys),
    SECTION_KEY(flow_control, flow_keys),
    SECTION_KEY(access_log, access_log_keys),
    SECTION_KEY(error_log, error_log_keys),
    SECTION_KEY(status, status_keys),
    STRING_KEY(pid_file, set_string, pid_file),
    STRING_KEY(user, set_string, user),
    STRING_KEY(group, set_string, group),
    {NULL, NULL, 0, NULL, 0, 0},
};

static void walk_mapping(load_ctx *x, yaml_node_t *n, const key_def *table, const char *section)
{
    uint32_t seen = 0; /* tables have fewer than 32 keys */
    char shown[80], path[64];
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *key = node_at(x, p->key), *val = node_at(x, p->value);
        if (!key || !val)
            continue;
        if (key->type != YAML_SCALAR_NODE) {
            report(x, key, "keys must be plain names, not %s", kind_name(key));
            continue;
        }
        const char *name = (const char *)key->data.scalar.value;
        size_t i = 0;
        while (table[i].name &&
               (strcmp(table[i].name, name) || strlen(name) != key->data.scalar.length))
            i++;
        if (!table[i].name) {
            if (section)
                report(x, key, "unknown key '%s' in '%s'", printable(key, shown, sizeof shown),
                       section);
            else
                report(x, key, "unknown key '%s'", printable(key, shown, sizeof shown));
            continue;
        }
        if (seen & (1u << i)) {
            if (section)
                report(x, key, "duplicate key '%s' in '%s'", table[i].name, section);
            else
                report(x, key, "duplicate key '%s'", table[i].name);
            continue;
        }
        seen |= 1u << i;
        if (section)
            snprintf(path, sizeof path, "%s.%s", section, table[i].name);
        else
            snprintf(path, sizeof path, "%s", table[i].name);
        table[i].set(x, &table[i], val, path);
    }
}

/* libyaml's reader errors carry a byte offset, not a mark: count lines ourselves. */
static void offset_to_mark(const char *text, size_t len, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static void report_syntax(load_ctx *x, yaml_parser_t *p, const char *text, size_t len)
{
    size_t line, col;
    if (p->error == YAML_READER_ERROR) {
        offset_to_mark(text, len, p->problem_offset, &line, &col);
    } else {
        line = p->problem_mark.line + 1;
        col = p->problem_mark.column + 1;
    }
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_MEMORY_ERROR)
        problem = "out of memory";
    if (p->context)
        report_at(x, line, col, "%s (%s)", problem, p->context);
    else
        report_at(x, line, col, "%s", problem);
}

/* Event pre-pass: 0 when the nesting is sane, else -1 after reporting. */
static int check_depth(load_ctx *x, const char *text, size_t len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    int depth = 0, rc = 0;

    if (!yaml_parser_initialize(&parser))
        return 0; /* the real load reports the failure */
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    for (;;) {
        if (!yaml_parser_parse(&parser, &ev))
            break; /* syntax errors are reported by the real load */
        yaml_event_type_t type = ev.type;
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            if (++depth > MAX_DEPTH) {
                report_at(x, ev.start_mark.line + 1, ev.start_mark.column + 1,
                          "nested more than %d levels deep", MAX_DEPTH);
                rc = -1;
            }
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&ev);
        if (rc < 0 || type == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&parser);
    return rc;
}

static int load_buffer(pagid_config *c, const char *text, size_t len, const char *name, FILE *err)
{
    load_ctx x = {.c = c, .name = name, .err = err};
    yaml_parser_t parser;
    yaml_document_t doc;

    if (check_depth(&x, text, len) < 0)
        return x.errors;
    if (!yaml_parser_initialize(&parser)) {
        report_at(&x, 1, 1, "out of memory");
        return x.errors;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        report_syntax(&x, &parser, text, len);
        yaml_parser_delete(&parser);
        return x.errors;
    }
    x.doc = &doc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && is_null(root)) {
        /* An empty file (or only comments) is a valid, all-defaults config. */
    } else if (root && root->type != YAML_MAPPING_NODE) {
        report(&x, root, "the top level must be a mapping of keys, not %s", kind_name(root));
    } else if (root) {
        walk_mapping(&x, root, top_keys, NULL);
    }

    if (root && c->low_watermark >= c->high_watermark) {
        const yaml_node_t *at = x.low_node ? x.low_node : x.high_node;
        if (at)
            report(&x, at,
                   "'flow_control.low_watermark' (%zu) must be less than "
                   "'flow_control.high_watermark' (%zu)",
                   c->low_watermark, c->high_watermark);
    }

    /* A second document is almost certainly a stray "---"; say so. */
    if (root) {
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            report_syntax(&x, &parser, text, len);
        } else {
            yaml_node_t *r2 = yaml_document_get_root_node(&next);
            if (r2)
                report(&x, r2, "more than one YAML document; a config file holds one");
            yaml_document_delete(&next);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return x.errors;
}

static int replace_source(pagid_config *c, const char *name)
{
    char *s = strdup(name);
    if (!s)
        return -1;
    free(c->source);
    c->source = s;
    return 0;
}

int config_load_string(pagid_config *c, const char *yaml, const char *name, FILE *err)
{
    if (replace_source(c, name) < 0) {
        fprintf(err, "%s: out of memory\n", name);
        return 1;
    }
    return load_buffer(c, yaml, strlen(yaml), name, err);
}

int config_load_file(pagid_config *c, const char *path, FILE *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(err, "%s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    buf text = BUF_INIT;
    const char *problem = NULL;
    for (;;) {
        char *w = buf_reserve(&text, 64 * 1024);
        if (!w) {
            problem = "out of memory";
            break;
        }
        size_t got = fread(w, 1, 64 * 1024, f);
        buf_commit(&text, got);
        if (buf_size(&text) > MAX_FILE_SIZE) {
            problem = "too large for a config file (over 16 MiB)";
            break;
        }
        if (got == 0) {
            if (ferror(f))
                problem = strerror(errno ? errno : EIO);
            break;
        }
    }
    fclose(f);
    int n = 1;
    if (problem)
        fprintf(err, "%s: cannot read: %s\n", path, problem);
    else if (replace_source(c, path) < 0)
        fprintf(err, "%s: out of memory\n", path);
    else
        n = load_buffer(c, text.data ? buf_head(&text) : "", buf_size(&text), path, err);
    buf_free(&text);
    return n;
}

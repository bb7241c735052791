/*
 * config_dump.c - writes a pagid_config back as YAML (pagid -T): every key
 * of the model, in forms the loader reads back to the very same model.
 * libyaml's emitter does the quoting, so no path or format string can break
 * the document; sizes and durations are printed in the largest unit that is
 * exact, so nothing is rounded on the way back.
 */
#include "config_dump.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "redis_url.h"
#include "tls_server.h"

typedef struct dumper {
    yaml_emitter_t em;
    int failed;
} dumper;

static int on_write(void *data, unsigned char *buffer, size_t size)
{
    return fwrite(buffer, 1, size, data) == size;
}

/* ok: the event's initialize succeeded. The emitter owns an event it is
 * given, even when it fails; after a failure the rest are only freed. */
static void emit(dumper *d, yaml_event_t *ev, int ok)
{
    if (!ok)
        d->failed = 1;
    else if (d->failed)
        yaml_event_delete(ev);
    else if (!yaml_emitter_emit(&d->em, ev))
        d->failed = 1;
}

/* The loader takes an empty or ~/null plain scalar as "no value". */
static int looks_null(const char *s)
{
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static void scalar_styled(dumper *d, const char *s, yaml_scalar_style_t style)
{
    yaml_event_t ev;
    int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
                                          style);
    emit(d, &ev, ok);
}

/* A string value: plain when libyaml finds that safe, quoted otherwise. */
static void str(dumper *d, const char *s)
{
    scalar_styled(d, s, looks_null(s) ? YAML_SINGLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
}

/* A word of our own (a number, ~, off, true): always plain. */
static void word(dumper *d, const char *s)
{
    scalar_styled(d, s, YAML_PLAIN_SCALAR_STYLE);
}

static void map_start(dumper *d)
{
    yaml_event_t ev;
    emit(d, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE));
}

static void map_end(dumper *d)
{
    yaml_event_t ev;
    emit(d, &ev, yaml_mapping_end_event_initialize(&ev));
}

static void seq_start(dumper *d, int flow)
{
    yaml_event_t ev;
    emit(d, &ev,
         yaml_sequence_start_event_initialize(
             &ev, NULL, NULL, 1, flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE));
}

static void seq_end(dumper *d)
{
    yaml_event_t ev;
    emit(d, &ev, yaml_sequence_end_event_initialize(&ev));
}

static void key_str(dumper *d, const char *key, const char *value)
{
    word(d, key);
    str(d, value);
}

/* An optional string: null_word (e.g. "off", or ~) when unset. */
static void key_opt(dumper *d, const char *key, const char *value, const char *null_word)
{
    word(d, key);
    if (value)
        str(d, value);
    else
        word(d, null_word);
}

static void key_count(dumper *d, const char *key, size_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", v);
    word(d, key);
    word(d, buf);
}

void config_format_size(size_t v, char *buf, size_t len)
{
    static const struct {
        size_t mult;
        char unit;
    } units[] = {{(size_t)1 << 30, 'g'}, {(size_t)1 << 20, 'm'}, {(size_t)1 << 10, 'k'}};
    for (size_t i = 0; v && i < sizeof units / sizeof units[0]; i++) {
        if (v % units[i].mult == 0) {
            snprintf(buf, len, "%zu%c", v / units[i].mult, units[i].unit);
            return;
        }
    }
    snprintf(buf, len, "%zu", v);
}

void config_format_duration(double v, char *buf, size_t len)
{
    if (v == 0) {
        snprintf(buf, len, "0");
        return;
    }
    /* Whole seconds (durations are at most a year, so they fit); "60s"
     * rather than "1m", as conf/pagid.yaml writes it. */
    if (v == floor(v) && v < 1e15) {
        long long s = (long long)v;
        if (s % 3600 == 0)
            snprintf(buf, len, "%lldh", s / 3600);
        else if (s % 60 == 0 && s > 60)
            snprintf(buf, len, "%lldm", s / 60);
        else
            snprintf(buf, len, "%llds", s);
        return;
    }
    /* The loader computes "N ms" as N * 0.001: accept only what comes back identical. */
    long long ms = llround(v * 1000);
    if ((double)ms * 0.001 == v) {
        snprintf(buf, len, "%lldms", ms);
        return;
    }
    /* Otherwise the shortest plain decimal that reads back exactly (the
     * loader took at most 31 characters, so one of those does). */
    for (int prec = 1; prec <= 40; prec++) {
        int n = snprintf(buf, len, "%.*f", prec, v);
        if (strtod(buf, NULL) == v) {
            if (n > 0 && (size_t)n + 1 < len)
                strcat(buf, "s");
            return;
        }
    }
}

static void key_size(dumper *d, const char *key, size_t v)
{
    char buf[32];
    config_format_size(v, buf, sizeof buf);
    word(d, key);
    word(d, buf);
}

static void key_duration(dumper *d, const char *key, double v)
{
    char buf[64];
    config_format_duration(v, buf, sizeof buf);
    word(d, key);
    word(d, buf);
}

/* lib: the ':'-joined perl_lib as a list. */
static void perl_lib_list(dumper *d, const char *joined)
{
    char *copy = strdup(joined);
    if (!copy) {
        d->failed = 1;
        return;
    }
    seq_start(d, 0);
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
        str(d, dir);
    seq_end(d);
    free(copy);
}

/* A worker_pool mapping: {processes, queue_limit, timeout[, handlers]}. */
static void pool_map(dumper *d, const pagid_pool *p)
{
    map_start(d);
    key_count(d, "processes", (size_t)p->processes);
    key_count(d, "queue_limit", (size_t)p->queue_limit);
    key_duration(d, "timeout", p->timeout);
    if (p->handlers)
        key_str(d, "handlers", p->handlers);
    map_end(d);
}

/*
 * An app value in the loader's forms: a static app as its mapping (so its
 * options show), a Perl app as {perl, lib} ({psgi, lib}) when it carries the lib list,
 * anything else as its spec.
 */
static void app_value(dumper *d, const char *spec, const pagid_static_opts *so,
                      const char *perl_lib)
{
    if (strncmp(spec, "static:", 7) == 0) {
        map_start(d);
        key_str(d, "static", spec + 7);
        word(d, "listing");
        word(d, so->listing ? "true" : "false");
        word(d, "follow_symlinks");
        word(d, so->follow_symlinks ? "true" : "false");
        key_count(d, "cache_entries", so->cache_entries);
        key_size(d, "cache_bytes", so->cache_bytes);
        key_duration(d, "cache_valid", so->cache_valid);
        map_end(d);
    } else if (perl_lib) {
        map_start(d);
        key_str(d, config_perl_app_kind(spec) == CONFIG_PERL_PSGI ? "psgi" : "perl", spec);
        word(d, "lib");
        perl_lib_list(d, perl_lib);
        map_end(d);
    } else {
        str(d, spec);
    }
}

/* A ':'-joined list of names (groups) as a flow sequence. */
static void name_list(dumper *d, const char *list)
{
    seq_start(d, 1);
    while (*list) {
        size_t len = strcspn(list, ":");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, list);
        str(d, name);
        list += len + (list[len] == ':');
    }
    seq_end(d);
}

/* A listener's tls mapping with every default spelled out (groups: the ones
 * it offers, its own or tls.groups); certs[0] is shown as cert/key, the
 * others as certificates (the same config again). */
static void tls_mapping(dumper *d, const pagid_config *c, const pagid_tls *t)
{
    static const char *const modes[] = {"none", "optional", "require"};
    word(d, "tls");
    map_start(d);
    if (t->n_certs > 0) {
        key_str(d, "cert", t->certs[0].cert);
        key_str(d, "key", t->certs[0].key);
    }
    if (t->n_certs > 1) {
        word(d, "certificates");
        seq_start(d, 0);
        for (size_t i = 1; i < t->n_certs; i++) {
            map_start(d);
            key_str(d, "cert", t->certs[i].cert);
            key_str(d, "key", t->certs[i].key);
            if (t->certs[i].ocsp)
                key_str(d, "ocsp", t->certs[i].ocsp);
            map_end(d);
        }
        seq_end(d);
    }
    word(d, "protocols");
    seq_start(d, 1);
    const char *p = t->protocols ? t->protocols : "TLSv1.2 TLSv1.3";
    if (strstr(p, "TLSv1.2"))
        word(d, "TLSv1.2");
    if (strstr(p, "TLSv1.3"))
        word(d, "TLSv1.3");
    seq_end(d);
    key_str(d, "ciphers", t->ciphers ? t->ciphers : PAGID_TLS_DEFAULT_CIPHERS);
    key_str(d, "ciphersuites", t->ciphersuites ? t->ciphersuites : PAGID_TLS_DEFAULT_SUITES);
    pagid_pos pos;
    word(d, "groups");
    name_list(d, tls_server_groups(c, t, &pos));
    if (t->client_auth != TLS_CLIENT_NONE || t->client_ca) {
        word(d, "client_auth");
        map_start(d);
        if (t->client_ca)
            key_str(d, "ca", t->client_ca);
        word(d, "mode");
        word(d, modes[t->client_auth]);
        if (t->client_crl)
            key_str(d, "crl", t->client_crl);
        if (t->verify_depth >= 0) {
            char n[16];
            snprintf(n, sizeof n, "%d", t->verify_depth);
            word(d, "verify_depth");
            word(d, n);
        }
        map_end(d);
    }
    word(d, "session_tickets");
    word(d, t->session_tickets ? "true" : "false");
    if (t->n_ticket_keys) {
        word(d, "session_ticket_key");
        seq_start(d, 0);
        for (size_t i = 0; i < t->n_ticket_keys; i++)
            str(d, t->ticket_keys[i]);
        seq_end(d);
    }
    map_end(d);
}

static void listen_entry(dumper *d, const pagid_config *c, const pagid_listen *l)
{
    int h2c = !l->tls && l->http2 == PAGID_H2_PRIOR_KNOWLEDGE;
    if (!l->tls && !h2c && (l->kind != LISTEN_UNIX || !(l->has_mode || l->has_uid || l->has_gid))) {
        str(d, l->spec);
        return;
    }
    char buf[32];
    map_start(d);
    key_str(d, "address", l->spec);
    if (l->has_mode) {
        /* Quoted: to YAML 1.1 tools a bare 0660 is an octal integer, to 1.2 a decimal one. */
        snprintf(buf, sizeof buf, "0%03o", l->mode);
        word(d, "mode");
        scalar_styled(d, buf, YAML_SINGLE_QUOTED_SCALAR_STYLE);
    }
    /* Numeric ids: what the loader resolved, immune to a changed passwd. */
    if (l->has_uid)
        key_count(d, "owner", (size_t)l->uid);
    if (l->has_gid)
        key_count(d, "group", (size_t)l->gid);
    if (l->tls)
        tls_mapping(d, c, l->tls);
    if (l->tls || h2c) {
        word(d, "http2");
        word(d, h2c ? "prior-knowledge" : config_listen_h2(l) ? "true" : "false");
    }
    map_end(d);
}

static void dump_body(dumper *d, const pagid_config *c)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    const pagid_timeouts *t = &c->timeouts;
    const pagid_limits *l = &c->limits;
    char buf[32];

    map_start(d);
    /* The status listener joins the list at finalize; it is shown under status. */
    word(d, "listen");
    seq_start(d, 0);
    for (size_t i = 0; i < c->n_listens; i++)
        if (!c->listens[i].status)
            listen_entry(d, c, &c->listens[i]);
    seq_end(d);

    word(d, "workers");
    if (c->workers == CONFIG_WORKERS_AUTO) {
        word(d, "auto");
    } else {
        snprintf(buf, sizeof buf, "%d", c->workers);
        word(d, buf);
    }
    key_count(d, "max_requests", c->max_requests);
    /* The effective value: what `auto` decides for this config. */
    word(d, "preload");
    word(d, config_preload_wanted(c) ? "true" : "false");
    word(d, "debug");
    word(d, c->debug ? "true" : "false");

    /* perl_lib is one list for the whole config; it travels with the first
     * Perl app (without any, nothing would use it). */
    const char *lib = c->perl_lib;
    word(d, "app");
    int top_perl = lib && config_perl_app_kind(c->app);
    /* Written where it was: in the top-level app's mapping when that is a
     * Perl app, else as the top-level worker_pool (mounted PSGI apps). A
     * PSGI config's {processes: 0} too, or it would read back pooled. */
    int pool_shown = c->worker_pool.processes > 0 || (c->worker_pool.set && config_has_psgi_app(c));
    if (pool_shown && config_perl_app_kind(c->app)) {
        map_start(d);
        key_str(d, config_perl_app_kind(c->app) == CONFIG_PERL_PSGI ? "psgi" : "perl", c->app);
        if (top_perl) {
            word(d, "lib");
            perl_lib_list(d, lib);
        }
        word(d, "worker_pool");
        pool_map(d, &c->worker_pool);
        map_end(d);
    } else {
        app_value(d, c->app, &c->app_static, top_perl ? lib : NULL);
        if (pool_shown) {
            word(d, "worker_pool");
            pool_map(d, &c->worker_pool);
        }
    }
    if (top_perl)
        lib = NULL;

    word(d, "mounts");
    seq_start(d, c->n_mounts == 0);
    for (size_t i = 0; i < c->n_mounts; i++) {
        const pagid_mount *m = &c->mounts[i];
        int perl = lib && config_perl_app_kind(m->app);
        map_start(d);
        key_str(d, "path", m->path);
        word(d, "app");
        app_value(d, m->app, &m->static_opts, perl ? lib : NULL);
        map_end(d);
        if (perl)
            lib = NULL;
    }
    seq_end(d);

    word(d, "limits");
    map_start(d);
    key_count(d, "max_connections", l->max_connections);
    key_size(d, "max_request_line", l->max_request_line);
    key_size(d, "max_header_size", l->max_header_size);
    key_count(d, "max_header_count", l->max_header_count);
    key_size(d, "max_body_size", l->max_body_size);
    key_size(d, "max_ws_message_size", l->max_ws_message_size);
    key_count(d, "max_receive_queue", l->max_receive_queue);
    key_size(d, "max_receive_queue_size", l->max_receive_queue_size);
    key_count(d, "http2_max_streams", l->http2_max_streams);
    key_size(d, "http2_stream_window", l->http2_stream_window);
    key_size(d, "http2_connection_window", l->http2_connection_window);
    key_count(d, "http2_max_resets", l->http2_max_resets);
    key_count(d, "http2_max_open_files", l->http2_max_open_files);
    map_end(d);

    word(d, "timeouts");
    map_start(d);
    key_duration(d, "header", t->header);
    key_duration(d, "idle", t->idle);
    key_duration(d, "keepalive", t->keepalive);
    key_duration(d, "request", t->request);
    key_duration(d, "response", t->response);
    key_duration(d, "write", t->write);
    key_duration(d, "http2_window", t->http2_window);
    key_duration(d, "ws_queue", t->ws_queue);
    key_duration(d, "ws_idle", t->ws_idle);
    key_duration(d, "sse_idle", t->sse_idle);
    key_duration(d, "ws_close", t->ws_close);
    key_duration(d, "shutdown", t->shutdown);
    key_duration(d, "heartbeat", t->heartbeat);
    key_duration(d, "lifespan_startup", t->lifespan_startup);
    map_end(d);

    word(d, "flow_control");
    map_start(d);
    key_size(d, "high_watermark", c->high_watermark);
    key_size(d, "low_watermark", c->low_watermark);
    map_end(d);

    word(d, "access_log");
    map_start(d);
    key_opt(d, "path", c->access_log_path, "off");
    key_str(d, "format", c->access_log_format);
    map_end(d);

    word(d, "error_log");
    map_start(d);
    key_opt(d, "path", c->error_log_path, "stderr");
    word(d, "level");
    word(d, (unsigned)c->error_log_level < 4 ? levels[c->error_log_level] : "info");
    map_end(d);

    word(d, "status");
    map_start(d);
    key_opt(d, "listen", c->status_listen ? c->status_listen->spec : NULL, "off");
    key_str(d, "path", c->status_path);
    map_end(d);

    word(d, "pubsub");
    map_start(d);
    word(d, "backend");
    word(d, c->pubsub.backend == PUBSUB_BACKEND_REDIS ? "redis" : "local");
    /* The password never leaves in a dump (pagid -T goes to terminals and tickets). */
    char *url = c->pubsub.url ? redis_url_masked(c->pubsub.url) : NULL;
    key_opt(d, "url", c->pubsub.url ? (url ? url : "redis://***") : NULL, "~");
    free(url);
    key_str(d, "prefix", c->pubsub.prefix ? c->pubsub.prefix : "");
    key_size(d, "buffer", c->pubsub.buffer);
    word(d, "allowed_origins");
    seq_start(d, 1);
    for (size_t i = 0; i < c->pubsub.n_allowed_origins; i++)
        str(d, c->pubsub.allowed_origins[i]);
    seq_end(d);
    map_end(d);

    word(d, "shared_dicts");
    seq_start(d, 0);
    for (size_t i = 0; i < c->n_shared_dicts; i++) {
        map_start(d);
        key_str(d, "name", c->shared_dicts[i].name);
        key_size(d, "size", c->shared_dicts[i].size);
        map_end(d);
    }
    seq_end(d);

    word(d, "tls");
    map_start(d);
    word(d, "groups");
    name_list(d, c->tls_groups ? c->tls_groups : PAGID_TLS_DEFAULT_GROUPS);
    map_end(d);

    key_opt(d, "pid_file", c->pid_file, "~");
    key_opt(d, "user", c->user, "~");
    key_opt(d, "group", c->group, "~");
    map_end(d);
}

int config_dump(const pagid_config *c, FILE *out)
{
    dumper d = {.failed = 0};
    yaml_event_t ev;
    if (!c->app || !c->access_log_format || !c->status_path)
        return -1;
    if (!yaml_emitter_initialize(&d.em))
        return -1;
    yaml_emitter_set_output(&d.em, on_write, out);
    yaml_emitter_set_unicode(&d.em, 1);
    yaml_emitter_set_width(&d.em, -1); /* never fold a long format string */
    yaml_emitter_set_indent(&d.em, 2);
    emit(&d, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    emit(&d, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    dump_body(&d, c);
    emit(&d, &ev, yaml_document_end_event_initialize(&ev, 1));
    emit(&d, &ev, yaml_stream_end_event_initialize(&ev));
    if (!d.failed && !yaml_emitter_flush(&d.em))
        d.failed = 1;
    yaml_emitter_delete(&d.em);
    return d.failed || ferror(out) ? -1 : 0;
}

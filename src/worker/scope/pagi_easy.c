/*
 * pagi_easy.c - the one-call parts of pagi_easy.h: responses that finish the
 * scope, the bounded body reader and the lifespan runner. A layer on top of
 * pagi.h, behaving like app code would; from scope.h it uses only a slot for
 * its per-scope state (released with the scope, however the scope ends), a
 * scope reference across a deferral, and the refusal message of misuse.
 */
#include <pagi/pagi_easy.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scope.h"

/* Refuse fn's call with a message, without finishing s: in
 * pagi_scope_error and (once per call name, each in debug mode) the log. */
__attribute__((format(printf, 3, 4))) static int refuse(pagi_scope *s, const char *fn,
                                                        const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    scope_misuse_call(s, fn, "%s", what);
    return scope_fail(s, "%s: %s", fn, what);
}
#define REFUSE refuse

/*
 * What the layer keeps per scope, in the scope's layer slot (never the app's
 * userdata): its own sends in flight, so it never finishes a scope before
 * the last of their callbacks, the active body reader and the lifespan
 * runner. Freed by easy_release however the scope ends, also when the
 * server finishes it on the app's behalf with a receive still pending.
 */
typedef struct body_reader body_reader;
typedef struct lifespan_run lifespan_run;

typedef struct easy_scope {
    unsigned inflight;  /* the layer's accepted sends whose callback has not run */
    int responded;      /* pagi_respond was accepted once */
    int finish_pending; /* finish once inflight is 0 and hold is 0 */
    int hold;           /* an app callback is running: finish after it */
    char *finish_err;   /* owned; the error to finish with */
    body_reader *reader;
    lifespan_run *life;
} easy_scope;

static void reader_free(body_reader *r);
static void lifespan_release(lifespan_run *l);

static void easy_release(void *data)
{
    easy_scope *e = data;
    reader_free(e->reader);
    lifespan_release(e->life);
    free(e->finish_err);
    free(e);
}

static easy_scope *easy_of(pagi_scope *s)
{
    easy_scope *e = scope_layer_data(s);
    if (e == NULL && (e = calloc(1, sizeof *e)) != NULL)
        scope_set_layer_data(s, e, easy_release);
    return e;
}

/* Finish with err (first one wins) once nothing of the layer's is in flight. */
static void easy_finish(pagi_scope *s, easy_scope *e, const char *err)
{
    if (e == NULL) {
        pagi_scope_finish(s, err);
        return;
    }
    if (err != NULL && e->finish_err == NULL)
        e->finish_err = strdup(err);
    e->finish_pending = 1;
    if (e->inflight > 0 || e->hold)
        return;
    e->finish_pending = 0;
    pagi_scope_finish(s, e->finish_err ? e->finish_err : err);
}

static void easy_release_hold(pagi_scope *s, easy_scope *e)
{
    e->hold = 0;
    if (e->finish_pending)
        easy_finish(s, e, NULL);
}

static void easy_sent(pagi_scope *s, const char *err, void *ud)
{
    easy_scope *e = ud;
    e->inflight--;
    if (err != NULL)
        easy_finish(s, e, err);
    else if (e->finish_pending)
        easy_finish(s, e, NULL);
}

static int easy_send(pagi_scope *s, easy_scope *e, const pagi_event *ev)
{
    if (pagi_send(s, ev, easy_sent, e) != 0)
        return -1;
    e->inflight++;
    return 0;
}

/* Finish with the reason of the refused call (after the layer's sends in flight). */
static int finish_refused(pagi_scope *s, easy_scope *e)
{
    easy_finish(s, e, pagi_scope_error(s));
    return -1;
}

/* ---- responses ---- */

/*
 * The checks every response makes before it sends anything; fn is the
 * public call's name for the message. A refusal here does not finish s: the
 * app still owns it and may answer properly.
 */
static int respond_refused(pagi_scope *s, easy_scope *e, const char *fn, const char *ct,
                           const pagi_header *headers, size_t header_count, const void *body,
                           size_t len)
{
    if (len > 0 && body == NULL)
        return REFUSE(s, fn, "NULL body with a length of %zu", len);
    if (header_count > 0 && headers == NULL)
        return REFUSE(s, fn, "NULL headers with a count of %zu", header_count);
    (void)ct;
    /* The first response's sends may still be in flight. */
    if (e->responded)
        return REFUSE(s, fn, "a response was already sent on this scope");
    if (e->reader != NULL)
        return REFUSE(s, fn, "the body reader is still active (answer from its callback)");
    if (scope_owner(s) != NULL)
        return REFUSE(s, fn, "the scope is a member of a group (pagi_group_leave hands it back)");
    return 0;
}

static int respond(pagi_scope *s, const char *fn, int status, const char *content_type,
                   const pagi_header *headers, size_t header_count, const void *body, size_t len)
{
    if (!scope_live(s, fn))
        return -1;
    easy_scope *e = easy_of(s);
    if (e == NULL) {
        pagi_scope_finish(s, "pagi_respond: out of memory");
        return -1;
    }
    if (respond_refused(s, e, fn, content_type, headers, header_count, body, len) != 0)
        return -1;
    pagi_event_type start_t = PAGI_EV_HTTP_RESPONSE_START;
    pagi_event_type body_t = PAGI_EV_HTTP_RESPONSE_BODY;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_SSE) {
        start_t = PAGI_EV_SSE_HTTP_RESPONSE_START;
        body_t = PAGI_EV_SSE_HTTP_RESPONSE_BODY;
    } else if (pagi_scope_type_of(s) == PAGI_SCOPE_WEBSOCKET) {
        start_t = PAGI_EV_WEBSOCKET_HTTP_RESPONSE_START;
        body_t = PAGI_EV_WEBSOCKET_HTTP_RESPONSE_BODY;
    }
    pagi_header *h = malloc((header_count + 2) * sizeof *h);
    if (h == NULL) {
        easy_finish(s, e, "pagi_respond: out of memory");
        return -1;
    }
    char clen[24];
    snprintf(clen, sizeof clen, "%zu", len);
    size_t n = 0;
    if (content_type != NULL)
        h[n++] = (pagi_header){{"content-type", 12}, {content_type, strlen(content_type)}};
    h[n++] = (pagi_header){{"content-length", 14}, {clen, strlen(clen)}};
    for (size_t i = 0; i < header_count; i++)
        h[n++] = headers[i];

    pagi_event start = PAGI_EVENT_INIT(start_t);
    start.status = status;
    start.headers = h;
    start.header_count = n;
    /* Both events are copied by pagi_send: the body may follow at once. */
    int rc = easy_send(s, e, &start);
    free(h);
    if (rc != 0)
        return finish_refused(s, e);
    e->responded = 1;
    pagi_event ev = PAGI_EVENT_INIT(body_t);
    ev.body = (pagi_str){body ? body : "", len};
    if (easy_send(s, e, &ev) != 0)
        return finish_refused(s, e);
    easy_finish(s, e, NULL); /* from the last send callback */
    return 0;
}

int pagi_respond_headers(pagi_scope *s, int status, const char *content_type,
                         const pagi_header *headers, size_t header_count, const void *body,
                         size_t len)
{
    return respond(s, "pagi_respond_headers", status, content_type, headers, header_count, body,
                   len);
}

int pagi_respond(pagi_scope *s, int status, const char *content_type, const void *body, size_t len)
{
    return respond(s, "pagi_respond", status, content_type, NULL, 0, body, len);
}

int pagi_respond_text(pagi_scope *s, int status, const char *text)
{
    if (!scope_live(s, "pagi_respond_text"))
        return -1;
    if (text == NULL)
        return REFUSE(s, "pagi_respond_text", "NULL text");
    return respond(s, "pagi_respond_text", status, "text/plain; charset=utf-8", NULL, 0, text,
                   strlen(text));
}

/* ---- body reader ---- */

struct body_reader {
    pagi_body_cb cb;
    void *ud;
    size_t limit;
    char *buf; /* owned; len bytes + NUL */
    size_t len, cap;
    /* The answer over the limit (pagi_read_body_opts), copied: status 0 is
     * the default 413; tl_block owns the content type, body and headers. */
    int tl_status;
    const char *tl_type;
    pagi_str tl_body;
    const pagi_header *tl_headers;
    size_t tl_header_count;
    char *tl_block;
};

static void reader_free(body_reader *r)
{
    if (r == NULL)
        return;
    free(r->buf);
    free(r->tl_block);
    free(r);
}

/* Copy the app's over-the-limit answer into one block owned by r. */
static int reader_set_answer(body_reader *r, const pagi_body_opts *o)
{
    size_t ct = o->content_type ? strlen(o->content_type) + 1 : 0;
    size_t need = o->header_count * sizeof(pagi_header) + ct + o->body.len;
    for (size_t i = 0; i < o->header_count; i++)
        need += o->headers[i].name.len + o->headers[i].value.len;
    char *b = malloc(need ? need : 1);
    if (b == NULL)
        return -1;
    pagi_header *h = (pagi_header *)b;
    char *p = b + o->header_count * sizeof(pagi_header);
    for (size_t i = 0; i < o->header_count; i++) {
        memcpy(p, o->headers[i].name.ptr, o->headers[i].name.len);
        h[i].name = (pagi_str){p, o->headers[i].name.len};
        p += h[i].name.len;
        memcpy(p, o->headers[i].value.ptr, o->headers[i].value.len);
        h[i].value = (pagi_str){p, o->headers[i].value.len};
        p += h[i].value.len;
    }
    if (ct) {
        memcpy(p, o->content_type, ct);
        r->tl_type = p;
        p += ct;
    }
    if (o->body.len)
        memcpy(p, o->body.ptr, o->body.len);
    r->tl_body = (pagi_str){p, o->body.len};
    r->tl_headers = h;
    r->tl_header_count = o->header_count;
    r->tl_status = o->status;
    r->tl_block = b;
    return 0;
}

/* The answer to a body over the limit: the app's (pagi_read_body_opts) or a plain 413. */
static void reader_answer_too_large(pagi_scope *s, body_reader *r)
{
    if (r->tl_block == NULL) {
        pagi_respond_text(s, 413, "request body too large\n");
        return;
    }
    respond(s, "pagi_read_body_opts", r->tl_status ? r->tl_status : 413,
            r->tl_type ? r->tl_type : "text/plain; charset=utf-8", r->tl_headers,
            r->tl_header_count, r->tl_body.len ? r->tl_body.ptr : "request body too large\n",
            r->tl_body.len ? r->tl_body.len : strlen("request body too large\n"));
}

/*
 * Hand the outcome to the app once (never inside one of its calls: from a
 * receive callback or a deferred job), then drop the reader. On an error,
 * answer first (status, 0 for none), then cb, then finish the scope: the
 * finish waits for cb and for the answer's send callback.
 */
static void reader_done(pagi_scope *s, easy_scope *e, const char *err, int status,
                        const char *finish_err)
{
    body_reader *r = e->reader;
    e->reader = NULL;
    if (err == NULL) {
        r->cb(s, r->buf ? r->buf : "", r->len, NULL, r->ud);
        reader_free(r);
        return;
    }
    e->hold = 1;
    if (status == 413)
        reader_answer_too_large(s, r);
    else if (status != 0)
        pagi_respond_text(s, status, "out of memory\n");
    r->cb(s, NULL, 0, err, r->ud);
    reader_free(r);
    easy_finish(s, e, finish_err);
    easy_release_hold(s, e);
}

static int reader_append(body_reader *r, pagi_str chunk)
{
    if (r->len + chunk.len + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 1024;
        while (cap < r->len + chunk.len + 1)
            cap *= 2;
        char *p = realloc(r->buf, cap);
        if (p == NULL)
            return -1;
        r->buf = p;
        r->cap = cap;
    }
    if (chunk.len)
        memcpy(r->buf + r->len, chunk.ptr, chunk.len);
    r->len += chunk.len;
    r->buf[r->len] = '\0';
    return 0;
}

static void reader_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    easy_scope *e = ud;
    body_reader *r = e->reader;

    if (ev->type != PAGI_EV_HTTP_REQUEST && ev->type != PAGI_EV_SSE_REQUEST) {
        /* A disconnect: nobody to answer, and no 500 backstop either. */
        reader_done(s, e, "client disconnected", 0, NULL);
        return;
    }
    if (r->len + ev->body.len > r->limit) {
        reader_done(s, e, "request body too large", 413, NULL);
        return;
    }
    if (reader_append(r, ev->body) != 0) {
        reader_done(s, e, "out of memory", 500, NULL);
        return;
    }
    if (!ev->more) {
        reader_done(s, e, NULL, 0, NULL);
        return;
    }
    if (pagi_receive(s, reader_event, e) != 0)
        reader_done(s, e, pagi_scope_error(s), 0, pagi_scope_error(s));
}

/* A Content-Length over the limit, answered from the run queue (the scope
 * reference taken at the deferral keeps s valid until then). */
static void reader_refuse_announced(void *ud)
{
    pagi_scope *s = ud;
    easy_scope *e = scope_layer_data(s);
    /* Finished meanwhile by the server (worker exiting): easy_release frees the reader. */
    if (!scope_is_finished(s) && e != NULL && e->reader != NULL)
        reader_done(s, e, "request body too large", 413, NULL);
    scope_unref(s);
}

/* The announced length, or -1 when absent. pagi.h has no parsed value; the
 * HTTP/1.1 parser already refused a malformed one with 400, so a strict
 * decimal parse here only guards against what cannot arrive. */
static long long content_length(const pagi_scope *s)
{
    pagi_str v;
    if (!pagi_scope_header(s, "content-length", &v) || v.len == 0 || v.len > 18)
        return -1;
    long long n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return -1;
        n = n * 10 + (v.ptr[i] - '0');
    }
    return n;
}

static int read_body(pagi_scope *s, const char *fn, size_t limit, const pagi_body_opts *opts,
                     pagi_body_cb cb, void *ud)
{
    if (!scope_live(s, fn))
        return -1;
    pagi_scope_type t = pagi_scope_type_of(s);
    if (t != PAGI_SCOPE_HTTP && t != PAGI_SCOPE_SSE)
        return REFUSE(s, fn, "not an http or sse scope");
    if (cb == NULL)
        return REFUSE(s, fn, "no callback");
    if (opts != NULL && ((opts->header_count > 0 && opts->headers == NULL) ||
                         (opts->body.len > 0 && opts->body.ptr == NULL) ||
                         (opts->status != 0 && (opts->status < 200 || opts->status > 599))))
        return REFUSE(s, fn, "bad options (NULL headers or body, or a status outside 200-599)");
    easy_scope *e = easy_of(s);
    if (e != NULL && e->reader != NULL)
        return REFUSE(s, fn, "a body reader is already active");
    if (e != NULL && e->responded)
        return REFUSE(s, fn, "a response was already sent on this scope");
    body_reader *r = e ? calloc(1, sizeof *r) : NULL;
    if (r != NULL && opts != NULL && reader_set_answer(r, opts) != 0) {
        free(r);
        r = NULL;
    }
    if (r == NULL) {
        pagi_scope_finish(s, "pagi_read_body: out of memory");
        return -1;
    }
    r->cb = cb;
    r->ud = ud;
    r->limit = limit;
    e->reader = r;
    long long announced = content_length(s);
    if (announced >= 0 && (unsigned long long)announced > limit) {
        /* Not from inside this call: callbacks never nest (pagi_easy(3)). */
        scope_ref(s);
        if (pagi_defer(pagi_scope_loop(s), reader_refuse_announced, s) == 0)
            return 0;
        scope_unref(s);
        e->reader = NULL;
        reader_free(r);
        pagi_scope_finish(s, "pagi_read_body: out of memory");
        return -1;
    }
    if (pagi_receive(s, reader_event, e) != 0) {
        e->reader = NULL;
        reader_free(r);
        return finish_refused(s, e);
    }
    return 0;
}

int pagi_read_body(pagi_scope *s, size_t limit, pagi_body_cb cb, void *ud)
{
    return read_body(s, "pagi_read_body", limit, NULL, cb, ud);
}

int pagi_read_body_opts(pagi_scope *s, const pagi_body_opts *opts, pagi_body_cb cb, void *ud)
{
    if (opts == NULL) {
        if (scope_live(s, "pagi_read_body_opts"))
            REFUSE(s, "pagi_read_body_opts", "NULL options");
        return -1;
    }
    return read_body(s, "pagi_read_body_opts", opts->limit, opts, cb, ud);
}

/* ---- lifespan ---- */

struct lifespan_run {
    char *key; /* owned copy, or NULL */
    pagi_lifespan_create_fn create;
    pagi_lifespan_destroy_fn destroy;
    void *ud;
    void *obj;
    int created; /* obj made by create and not yet destroyed */
};

static void lifespan_event(pagi_scope *s, const pagi_event *ev, void *ud);

static void lifespan_destroy(lifespan_run *l)
{
    if (l->created && l->destroy)
        l->destroy(l->obj, l->ud);
    l->created = 0;
}

/* From easy_release: the scope is gone however it ended (a worker exiting
 * with lifespan.shutdown never delivered included): destroy what was made. */
static void lifespan_release(lifespan_run *l)
{
    if (l == NULL)
        return;
    lifespan_destroy(l);
    free(l->key);
    free(l);
}

static void lifespan_last_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

static void lifespan_send(pagi_scope *s, lifespan_run *l, pagi_event *ev, pagi_send_cb cb)
{
    if (pagi_send(s, ev, cb, l) != 0) {
        lifespan_destroy(l);
        pagi_scope_finish(s, pagi_scope_error(s));
    }
}

static void lifespan_started(pagi_scope *s, const char *err, void *ud)
{
    lifespan_run *l = ud;
    if (err == NULL && pagi_receive(s, lifespan_event, l) == 0)
        return;
    lifespan_destroy(l);
    pagi_scope_finish(s, err ? err : pagi_scope_error(s));
}

static void lifespan_startup(pagi_scope *s, lifespan_run *l)
{
    const char *err = NULL;
    void *obj = l->create ? l->create(s, l->ud, &err) : NULL;
    if (err == NULL && l->key != NULL && pagi_state_set(s, l->key, obj) != 0) {
        if (l->destroy)
            l->destroy(obj, l->ud);
        err = "cannot store the lifespan state";
    }
    if (err != NULL) {
        pagi_event failed = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_FAILED);
        failed.message = (pagi_str){err, strlen(err)};
        lifespan_send(s, l, &failed, lifespan_last_sent);
        return;
    }
    l->obj = obj;
    l->created = 1;
    pagi_event done = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_STARTUP_COMPLETE);
    lifespan_send(s, l, &done, lifespan_started);
}

static void lifespan_event(pagi_scope *s, const pagi_event *ev, void *ud)
{
    lifespan_run *l = ud;

    if (ev->type == PAGI_EV_LIFESPAN_STARTUP) {
        lifespan_startup(s, l);
        return;
    }
    if (ev->type == PAGI_EV_LIFESPAN_SHUTDOWN) {
        lifespan_destroy(l);
        pagi_event done = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
        lifespan_send(s, l, &done, lifespan_last_sent);
        return;
    }
    if (pagi_receive(s, lifespan_event, l) != 0) {
        lifespan_destroy(l);
        pagi_scope_finish(s, pagi_scope_error(s));
    }
}

int pagi_lifespan_run(pagi_scope *s, const char *key, pagi_lifespan_create_fn create,
                      pagi_lifespan_destroy_fn destroy, void *ud)
{
    if (!scope_live(s, "pagi_lifespan_run"))
        return -1;
    easy_scope *e = easy_of(s);
    lifespan_run *l = e && !e->life ? calloc(1, sizeof *l) : NULL;
    if (l == NULL || (key != NULL && (l->key = strdup(key)) == NULL)) {
        free(l);
        if (e != NULL && e->life != NULL)
            return scope_fail(s, "pagi_lifespan_run: already running on this scope");
        pagi_scope_finish(s, "pagi_lifespan_run: out of memory");
        return -1;
    }
    /* Owned by the scope's layer slot from here: freed (and destroy run) at its release. */
    e->life = l;
    l->create = create;
    l->destroy = destroy;
    l->ud = ud;
    if (pagi_receive(s, lifespan_event, l) != 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return -1;
    }
    return 0;
}

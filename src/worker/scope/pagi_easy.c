/*
 * pagi_easy.c - the one-call parts of pagi_easy.h: responses that finish the
 * scope, the bounded body reader and the lifespan runner. A layer on top of
 * pagi.h, behaving like app code would; from scope.h it uses only a slot for
 * its per-scope state (released with the scope, however the scope ends), a
 * scope reference across a deferral, and the refusal message of misuse.
 */
#include <pagi/pagi_easy.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scope.h"

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

int pagi_respond_headers(pagi_scope *s, int status, const char *content_type,
                         const pagi_header *headers, size_t header_count, const void *body,
                         size_t len)
{
    easy_scope *e = easy_of(s);
    if (e == NULL) {
        pagi_scope_finish(s, "pagi_respond: out of memory");
        return -1;
    }
    /* The first response's sends may still be in flight: refuse without finishing. */
    if (e->responded)
        return scope_fail(s, "pagi_respond: a response was already sent on this scope");
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
    ev.body = (pagi_str){body, len};
    if (easy_send(s, e, &ev) != 0)
        return finish_refused(s, e);
    easy_finish(s, e, NULL); /* from the last send callback */
    return 0;
}

int pagi_respond(pagi_scope *s, int status, const char *content_type, const void *body, size_t len)
{
    return pagi_respond_headers(s, status, content_type, NULL, 0, body, len);
}

int pagi_respond_text(pagi_scope *s, int status, const char *text)
{
    return pagi_respond(s, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* ---- body reader ---- */

struct body_reader {
    pagi_body_cb cb;
    void *ud;
    size_t limit;
    char *buf; /* owned; len bytes + NUL */
    size_t len, cap;
};

static void reader_free(body_reader *r)
{
    if (r == NULL)
        return;
    free(r->buf);
    free(r);
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
    if (status != 0)
        pagi_respond_text(s, status,
                          status == 413 ? "request body too large\n" : "out of memory\n");
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

int pagi_read_body(pagi_scope *s, size_t limit, pagi_body_cb cb, void *ud)
{
    pagi_scope_type t = pagi_scope_type_of(s);
    if (t != PAGI_SCOPE_HTTP && t != PAGI_SCOPE_SSE)
        return scope_fail(s, "pagi_read_body: not an http or sse scope");
    if (cb == NULL)
        return scope_fail(s, "pagi_read_body: no callback");
    easy_scope *e = easy_of(s);
    if (e != NULL && e->reader != NULL)
        return scope_fail(s, "pagi_read_body: a body reader is already active");
    body_reader *r = e ? calloc(1, sizeof *r) : NULL;
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

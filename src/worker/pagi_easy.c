/*
 * pagi_easy.c - the one-call parts of pagi_easy.h: responses that finish the
 * scope, the bounded body reader and the lifespan runner. A layer on top of
 * pagi.h: only public calls, so it behaves exactly like app code would.
 */
#include <pagi/pagi_easy.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void finish_after_send(pagi_scope *s, const char *err, void *ud)
{
    (void)ud;
    pagi_scope_finish(s, err);
}

/* Finish with the reason of the refused call; the caller returns -1. */
static int finish_refused(pagi_scope *s)
{
    pagi_scope_finish(s, pagi_scope_error(s));
    return -1;
}

/* ---- responses ---- */

int pagi_respond_headers(pagi_scope *s, int status, const char *content_type,
                         const pagi_header *headers, size_t header_count, const void *body,
                         size_t len)
{
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
        pagi_scope_finish(s, "pagi_respond: out of memory");
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
    int rc = pagi_send(s, &start, NULL, NULL);
    free(h);
    if (rc != 0)
        return finish_refused(s);
    pagi_event ev = PAGI_EVENT_INIT(body_t);
    ev.body = (pagi_str){body, len};
    if (pagi_send(s, &ev, finish_after_send, NULL) != 0)
        return finish_refused(s);
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

typedef struct body_reader {
    pagi_body_cb cb;
    void *ud;
    size_t limit;
    char *buf; /* owned; len bytes + NUL */
    size_t len, cap;
} body_reader;

/* Hand the outcome to the app once, then drop the reader. */
static void reader_done(pagi_scope *s, body_reader *r, const char *err)
{
    if (err == NULL)
        r->cb(s, r->buf ? r->buf : "", r->len, NULL, r->ud);
    else
        r->cb(s, NULL, 0, err, r->ud);
    free(r->buf);
    free(r);
}

static void reader_too_large(pagi_scope *s, body_reader *r)
{
    static const char msg[] = "request body too large";
    reader_done(s, r, msg);
    pagi_respond_text(s, 413, "request body too large\n");
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
    body_reader *r = ud;

    if (ev->type != PAGI_EV_HTTP_REQUEST && ev->type != PAGI_EV_SSE_REQUEST) {
        /* A disconnect: nobody to answer, and no 500 backstop either. */
        reader_done(s, r, "client disconnected");
        pagi_scope_finish(s, NULL);
        return;
    }
    if (r->len + ev->body.len > r->limit) {
        reader_too_large(s, r);
        return;
    }
    if (reader_append(r, ev->body) != 0) {
        reader_done(s, r, "out of memory");
        pagi_respond_text(s, 500, "out of memory\n");
        return;
    }
    if (!ev->more) {
        reader_done(s, r, NULL);
        return;
    }
    if (pagi_receive(s, reader_event, r) != 0) {
        const char *err = pagi_scope_error(s);
        reader_done(s, r, err);
        pagi_scope_finish(s, err);
    }
}

/* The announced length, or -1 when absent or not a plain decimal. */
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
    body_reader *r = calloc(1, sizeof *r);
    if (r == NULL) {
        pagi_scope_finish(s, "pagi_read_body: out of memory");
        return -1;
    }
    r->cb = cb;
    r->ud = ud;
    r->limit = limit;
    long long announced = content_length(s);
    if (announced >= 0 && (unsigned long long)announced > limit) {
        reader_too_large(s, r);
        return 0;
    }
    if (pagi_receive(s, reader_event, r) != 0) {
        free(r);
        return finish_refused(s);
    }
    return 0;
}

/* ---- lifespan ---- */

typedef struct lifespan_run {
    char *key; /* owned copy, or NULL */
    pagi_lifespan_create_fn create;
    pagi_lifespan_destroy_fn destroy;
    void *ud;
    void *obj;
    int created;
} lifespan_run;

static void lifespan_event(pagi_scope *s, const pagi_event *ev, void *ud);

static void lifespan_free(lifespan_run *l)
{
    free(l->key);
    free(l);
}

static void lifespan_last_sent(pagi_scope *s, const char *err, void *ud)
{
    lifespan_free(ud);
    pagi_scope_finish(s, err);
}

static void lifespan_send(pagi_scope *s, lifespan_run *l, pagi_event *ev, pagi_send_cb cb)
{
    if (pagi_send(s, ev, cb, l) != 0) {
        if (l->created && l->destroy)
            l->destroy(l->obj, l->ud);
        lifespan_free(l);
        finish_refused(s);
    }
}

static void lifespan_started(pagi_scope *s, const char *err, void *ud)
{
    lifespan_run *l = ud;
    if (err == NULL && pagi_receive(s, lifespan_event, l) == 0)
        return;
    if (l->destroy)
        l->destroy(l->obj, l->ud);
    lifespan_free(l);
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
        if (l->created && l->destroy)
            l->destroy(l->obj, l->ud);
        l->created = 0;
        pagi_event done = PAGI_EVENT_INIT(PAGI_EV_LIFESPAN_SHUTDOWN_COMPLETE);
        lifespan_send(s, l, &done, lifespan_last_sent);
        return;
    }
    if (pagi_receive(s, lifespan_event, l) != 0) {
        if (l->created && l->destroy)
            l->destroy(l->obj, l->ud);
        lifespan_free(l);
        finish_refused(s);
    }
}

int pagi_lifespan_run(pagi_scope *s, const char *key, pagi_lifespan_create_fn create,
                      pagi_lifespan_destroy_fn destroy, void *ud)
{
    lifespan_run *l = calloc(1, sizeof *l);
    if (l == NULL || (key != NULL && (l->key = strdup(key)) == NULL)) {
        free(l);
        pagi_scope_finish(s, "pagi_lifespan_run: out of memory");
        return -1;
    }
    l->create = create;
    l->destroy = destroy;
    l->ud = ud;
    if (pagi_receive(s, lifespan_event, l) != 0) {
        lifespan_free(l);
        return finish_refused(s);
    }
    return 0;
}

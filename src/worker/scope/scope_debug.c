/*
 * scope_debug.c - debug mode's side of the scope module: recognising a
 * stale handle (released scopes kept in a bounded quarantine instead of
 * freed), logging misuse with the request it concerns, and the crash note
 * and loop-hold timer around every call into app code.
 */
#include "scope_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "worker/core/crash.h"

/* Released scopes kept: a handle used within this many releases of its own
 * is recognised; an older one is undefined behaviour again. A few hundred
 * bytes each (the shell and its request copy). */
#define QUARANTINE_MAX 1024

struct scope_quarantine {
    pagi_scope *v[QUARANTINE_MAX];
    size_t head, n;
};

static const char *type_name(pagi_scope_type t)
{
    return t == PAGI_SCOPE_HTTP        ? "http"
           : t == PAGI_SCOPE_WEBSOCKET ? "websocket"
           : t == PAGI_SCOPE_SSE       ? "sse"
                                       : "lifespan";
}

static void forget(pagi_scope *s)
{
    scope_shell_put(s);
}

void scope_quarantine_put(pagi_scope *s)
{
    worker_ctx *w = s->w;
    if (!w->quarantine)
        w->quarantine = calloc(1, sizeof *w->quarantine);
    struct scope_quarantine *q = w->quarantine;
    s->h.magic = SCOPE_MAGIC_RELEASED;
    if (!q) {
        forget(s);
        return;
    }
    if (q->n == QUARANTINE_MAX) {
        forget(q->v[q->head]);
        q->head = (q->head + 1) % QUARANTINE_MAX;
        q->n--;
    }
    q->v[(q->head + q->n) % QUARANTINE_MAX] = s;
    q->n++;
}

void scope_quarantine_free(worker_ctx *w)
{
    struct scope_quarantine *q = w->quarantine;
    if (q) {
        for (size_t i = 0; i < q->n; i++)
            forget(q->v[(q->head + i) % QUARANTINE_MAX]);
        free(q);
        w->quarantine = NULL;
    }
    if (w->scope_pool) {
        /* Scopes still live at exit (abandoned, a reference never dropped)
         * go with the pool: their request copy is the one thing of theirs
         * outside it. */
        for (pagi_scope *s = w->scopes; s; s = s->next)
            scope_request_free(s);
        handle_pool_free(w->scope_pool);
        free(w->scope_pool);
        w->scope_pool = NULL;
    }
    scope_request_blocks_release(w);
}

const char *scope_label(const pagi_scope *s, char *out, size_t n)
{
    if (s->type == PAGI_SCOPE_LIFESPAN || !s->req.method) {
        snprintf(out, n, "%s scope", s->type == PAGI_SCOPE_LIFESPAN ? "lifespan" : "a");
        return out;
    }
    int k = snprintf(out, n, "%s ", s->req.method);
    if (k < 0 || (size_t)k >= n)
        return out;
    size_t at = (size_t)k;
    /* A decoded path may hold control characters: not into the log. */
    for (size_t i = 0; i < s->req.path.len && at + 4 < n && i < 200; i++) {
        unsigned char c = (unsigned char)s->req.path.ptr[i];
        out[at++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (s->req.path.len > 200 && at + 4 < n)
        for (int i = 0; i < 3; i++)
            out[at++] = '.';
    out[at] = '\0';
    return out;
}

/* Only the header of a shell back in the pool is read: its body is
 * poisoned under ASan, and may be a newer scope's soon. */
int scope_stale(const pagi_scope *s, const char *fn)
{
    if (!s) {
        handle_misuse(0, fn, "NULL scope");
    } else if (s->h.magic == SCOPE_MAGIC_RELEASED) {
        char label[256];
        log_error("debug: %s: stale handle %p (its scope, %s %s, was released)", fn,
                  (const void *)s, type_name(s->type), scope_label(s, label, sizeof label));
    } else if (s->h.magic == HANDLE_RELEASED) {
        handle_misuse(0, fn, "scope %p was released (stale handle)", (const void *)s);
    } else {
        handle_misuse(0, fn, "stale handle %p (not a live scope)", (const void *)s);
    }
    return 0;
}

void scope_misuse(const pagi_scope *s, const char *fmt, ...)
{
    char what[512], label[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    log_warn("debug: %s (%s scope, %s)", what, type_name(s->type),
             scope_label(s, label, sizeof label));
}

void scope_misuse_call(const pagi_scope *s, const char *fn, const char *fmt, ...)
{
    char what[512], label[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    handle_misuse(scope_debug(s), fn, "%s (%s scope, %s)", what, type_name(s->type),
                  scope_label(s, label, sizeof label));
}

void scope_hold_check(pagi_scope *s, double t0, const char *kind)
{
    double ms = loop_hold_end(&s->w->loop, t0);
    if (ms > 0) {
        char label[256];
        log_warn("debug: an app's %s callback held the loop for %.0f ms (%s scope, %s)", kind, ms,
                 type_name(s->type), scope_label(s, label, sizeof label));
    }
}

/*
 * app_call.c - the record of the app call a worker's loop is inside (see
 * app_call.h and shm_app_call): written as a seqlock, the request's method
 * and target escaped and cut to a fixed size once per request.
 */
#include "app_call.h"

#include <string.h>

/* Printable ASCII as it is; other bytes (and the backslash) as \xHH.
 * Returns the bytes written to out (at most cap - 1), *done = bytes of in used. */
static size_t escape(char *out, size_t cap, const char *in, size_t len, size_t *done)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0, i = 0;
    for (; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        int plain = c >= 0x20 && c < 0x7f && c != '\\';
        size_t need = plain ? 1 : 4;
        if (n + need > cap - 1)
            break;
        if (plain) {
            out[n++] = (char)c;
        } else {
            out[n++] = '\\';
            out[n++] = 'x';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    *done = i;
    return n;
}

#define TARGET_MAX 128 /* bytes of escaped target kept, then "..." */

static void put_request(shm_app_call *rec, const app_call_request *req)
{
    size_t m = 0, used;
    if (req && req->method) {
        m = strlen(req->method);
        if (m > sizeof rec->method - 1)
            m = sizeof rec->method - 1;
        memcpy(rec->method, req->method, m);
    }
    rec->method[m] = '\0';
    char *t = rec->target;
    size_t n = 0;
    int cut = 0;
    if (req && req->path) {
        n = escape(t, TARGET_MAX + 1, req->path, req->path_len, &used);
        cut = used < req->path_len;
        if (!cut && req->query_len && n < TARGET_MAX) {
            t[n++] = '?';
            n += escape(t + n, TARGET_MAX + 1 - n, req->query, req->query_len, &used);
            cut = used < req->query_len;
        } else if (req->query_len) {
            cut = 1;
        }
    }
    if (cut) {
        memcpy(t + n, "...", 3);
        n += 3;
    }
    t[n] = '\0';
}

void app_call_publish(pagi_loop *l, const char *kind, const app_call_request *req)
{
    shm_app_call *rec = l->app_call;
    uint32_t seq = atomic_load_explicit(&rec->seq, memory_order_relaxed);
    atomic_store_explicit(&rec->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    size_t k = strlen(kind);
    if (k > sizeof rec->kind - 1)
        k = sizeof rec->kind - 1;
    memcpy(rec->kind, kind, k);
    rec->kind[k] = '\0';
    const void *id = req ? req->id : NULL;
    uint32_t gen = req ? req->gen : 0;
    if (id != l->app_call_id || gen != l->app_call_gen || !id) {
        put_request(rec, req);
        l->app_call_id = id;
        l->app_call_gen = gen;
    }
    /* ev_now: the loop's time, cached when it woke; the offset makes it
     * CLOCK_MONOTONIC like the master's. */
    double now_ms = ev_now(l->ev) * 1000.0 + l->app_call_clock_offset;
    atomic_store_explicit(&rec->started_ms, now_ms > 1 ? (uint64_t)now_ms : 1,
                          memory_order_relaxed);
    atomic_store_explicit(&rec->seq, seq + 2, memory_order_release);
}

void app_call_clock_sync(pagi_loop *l, uint64_t now_ms)
{
    l->app_call_clock_offset = (double)now_ms - ev_now(l->ev) * 1000.0;
}

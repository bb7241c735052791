/*
 * fuzz_h2.c - libFuzzer harness for the HTTP/2 input path: the bytes are
 * what a client sends after the preface (which the harness supplies, so
 * the fuzzer starts at frames): an nghttp2 server session with pagid's
 * options (no automatic WINDOW_UPDATE, SETTINGS and ack limits) feeds each
 * request stream's fields to h2_request.c under small limits, and a whole
 * head is turned into a scope's facts, as h2_conn.c/h2_stream.c do (the
 * server announces RFC 8441, so an extended CONNECT reaches that path). Input
 * is fed in pieces sized by its first byte; output is drained after each.
 * Checked: the session and the head code never fault or leak; a request's
 * facts point into memory that lives (read back byte by byte); a decoded
 * path holds no NUL. Built by run.sh only.
 */
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http2/h2_request.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_h2: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static volatile unsigned sink;

/* Every head of this input, freed at its end (nghttp2_session_del calls no
 * stream-close callbacks for the streams still open). */
typedef struct holder {
    h2_head hd;
    struct holder *next;
} holder;
static holder *heads;

static void touch(pagi_str s)
{
    for (size_t i = 0; i < s.len; i++)
        sink += (unsigned char)s.ptr[i];
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    holder *h = malloc(sizeof *h);
    if (!h)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    h2_head_init(&h->hd);
    h->next = heads;
    heads = h;
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, &h->hd);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_head *hd = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!hd)
        return 0;
    int rc = h2_head_add(hd, name, nl, value, vl, 4096, 32);
    CHECK(rc == 0 || rc == 1);
    return rc ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    (void)ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_head *hd = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    if (!hd)
        return 0;
    h2_request r;
    int status = h2_head_request(hd, &r);
    CHECK(status == 0 || status == 400 || status == 431 || status == 500 || status == 501);
    if (status == 0) {
        CHECK(r.method != NULL);
        touch((pagi_str){r.method, strlen(r.method)});
        touch(r.path);
        touch(r.raw_path);
        touch(r.query);
        CHECK(!memchr(r.path.ptr, 0, r.path.len));
        /* RFC 8441: only an extended CONNECT for a websocket gets through. */
        CHECK(r.websocket == !strcmp(r.method, "CONNECT"));
        for (size_t i = 0; i < r.header_count; i++) {
            touch(r.headers[i].name);
            touch(r.headers[i].value);
            CHECK(r.headers[i].name.len > 0);
        }
        /* Answer it, so the output side runs too (a websocket's 200 keeps the stream open). */
        nghttp2_nv nv = {(uint8_t *)":status", (uint8_t *)(r.websocket ? "200" : "204"), 7, 3,
                         NGHTTP2_NV_FLAG_NONE};
        nghttp2_submit_response(ng, f->hd.stream_id, &nv, 1, NULL);
    }
    h2_request_free(&r);
    h2_head_free(hd);
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    (void)data;
    (void)ud;
    nghttp2_session_consume(ng, id, len); /* as the app's receive would */
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    (void)code;
    (void)ud;
    h2_head *hd = nghttp2_session_get_stream_user_data(ng, id);
    if (hd) {
        h2_head_free(hd);
        nghttp2_session_set_stream_user_data(ng, id, NULL);
    }
    return 0;
}

static void drain(nghttp2_session *ng)
{
    const uint8_t *out;
    for (int i = 0; i < 64; i++)
        if (nghttp2_session_mem_send(ng, &out) <= 0)
            break;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = data[0] ? data[0] : 1;
    data++;
    size--;
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    nghttp2_session *ng;
    CHECK(nghttp2_session_callbacks_new(&cb) == 0);
    CHECK(nghttp2_option_new(&opt) == 0);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    CHECK(nghttp2_session_server_new2(&ng, cb, NULL, opt) == 0);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
                                   {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 4096},
                                   {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1}};
    nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, 3);
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (nghttp2_session_mem_recv(ng, (const uint8_t *)preface, sizeof preface - 1) >= 0) {
        drain(ng);
        for (size_t off = 0; off < size;) {
            size_t n = size - off < piece ? size - off : piece;
            if (nghttp2_session_mem_recv(ng, data + off, n) < 0)
                break;
            drain(ng);
            off += n;
        }
    }
    nghttp2_session_del(ng);
    while (heads) {
        holder *h = heads;
        heads = h->next;
        h2_head_free(&h->hd);
        free(h);
    }
    return 0;
}

/*
 * h2_conn.c - HTTP/2 on a connection: the nghttp2 session fed from c->in
 * (nghttp2_session_mem_recv) and drained into c->out (mem_send), so pagid
 * keeps the socket, the loop and the output queue; the connection-level
 * defences (rapid reset, floods, bounded output) and GOAWAY on drain.
 */
#include "h2_conn.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/shm.h"
#include "h2_int.h"
#include "h2_mem.h"
#include "worker/core/reason.h"
#include "worker/core/tls_conn.h"

/* Streams at once, the receive windows and the rapid-reset rate
 * (CVE-2023-44487) are limits.http2_* (config.h). */
/* SETTINGS entries per frame, and control frames (PING, SETTINGS acks)
 * queued unanswered while the client does not read (nghttp2 counts them). */
#define H2_MAX_SETTINGS 32
/* CONTINUATION frames after one HEADERS (nghttp2's default, said aloud). */
#define H2_MAX_CONTINUATIONS 8
#define H2_MAX_OUTBOUND_ACK 1000
/* Frames a second that ask nothing of the server but its CPU: empty DATA
 * not ending a stream (CVE-2019-9518) and PRIORITY (CVE-2019-9513). A
 * browser sends a handful per connection. */
#define H2_MAX_IDLE_FRAMES_PER_SECOND 1000
/* After our RST_STREAM, frames the client sent before it saw the reset
 * are ignored for this long (RFC 9113 5.1 lets the time be limited). */
#define LATE_FRAMES_SECONDS 5.0
/* After the client's FIN: the first look for its reset (a round trip
 * after our GOAWAY and PING reach it), then doubling up to a second. */
#define PEER_LOOK_FIRST 0.02
#define PEER_LOOK_MAX 1.0

#define STR_(x) #x
#define STR(x) STR_(x)

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static h2_session *sess(const conn *c)
{
    return c->proto_state;
}

/* ---- output ---- */

static void stall_watch(h2_session *h);

static size_t out_cap(const conn *c)
{
    return c->w->cfg->high_watermark;
}

/*
 * Frame what nghttp2 has to send into the output queue, up to the
 * connection's high watermark: the rest waits in the streams (and in
 * nghttp2's small control queue) until the socket takes what is queued.
 */
static void h2_pump(h2_session *h)
{
    conn *c = h->c;
    if (h->in_pump || c->state == CONN_CLOSED)
        return;
    h->in_pump = 1;
    size_t before = outq_buffered(&c->out);
    while (outq_buffered(&c->out) < out_cap(c)) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h->ng, &data);
        if (n < 0) {
            log_info("HTTP/2 session with %s: %s", conn_peer_host(c), nghttp2_strerror((int)n));
            h->in_pump = 0;
            conn_close(c, reason_protocol_error);
            return;
        }
        if (n == 0 && h->send_paused) {
            h->send_paused = 0; /* a DATA frame filled the queue: the loop's test stops */
            continue;
        }
        if (n == 0)
            break;
        if (outq_append(&c->out, data, (size_t)n) < 0) {
            h->in_pump = 0;
            conn_close(c, reason_server_error);
            return;
        }
    }
    h->in_pump = 0;
    if (outq_buffered(&c->out) != before)
        conn_schedule_flush(c);
    /* Framing lowered what streams hold: their parked sends may complete
     * now, whether or not the socket takes anything yet. */
    h2_stream_after_write(h);
    if (c->state == CONN_CLOSED)
        return;
    stall_watch(h);
    if (!nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng) &&
        c->state != CONN_CLOSED)
        conn_close_after_write(c); /* GOAWAY sent and nothing left in flight */
}

/*
 * A client may keep its windows shut (a zero SETTINGS_INITIAL_WINDOW_SIZE,
 * no WINDOW_UPDATE) while c->out is empty, so the connection's write
 * timeout never runs: the session's own timer resets the streams holding
 * bytes once timeouts.http2_window passes with no DATA framed.
 */
static void stall_check(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)revents;
    h2_session *h = t->data;
    double wt = h->c->w->cfg->timeouts.http2_window;
    if (!h->pending || wt <= 0) {
        ev_timer_stop(ev, t);
        return;
    }
    double idle = ev_now(ev) - h->data_at;
    if (idle < wt) {
        t->repeat = wt - idle;
        ev_timer_again(ev, t);
        return;
    }
    ev_timer_stop(ev, t);
    h2_stream_timeout_stalled(h);
}

static void stall_watch(h2_session *h)
{
    struct ev_loop *ev = h->c->w->loop.ev;
    double wt = h->c->w->cfg->timeouts.http2_window;
    if (!h->pending || wt <= 0) {
        ev_timer_stop(ev, &h->stall);
    } else if (!ev_is_active(&h->stall)) {
        h->data_at = ev_now(ev);
        h->stall.repeat = wt;
        ev_timer_again(ev, &h->stall);
    }
}

/*
 * The client's FIN does not say whether it half-closed (it reads on: the
 * requests it sent whole are answered) or closed for good (its streams
 * would be held until something is written, or for ever: an idle event
 * stream, a long poll, a shut window). Every look sends a PING: a client
 * that closed answers it with a TCP reset, and then every stream ends at
 * once (client_closed). A half-close is waited for at most timeouts.write
 * from the FIN; then the streams left end the same way.
 */
static void peer_look(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)revents;
    h2_session *h = t->data;
    conn *c = h->c;
    if (c->state == CONN_CLOSED || c->state == CONN_LINGER)
        return;
    if (conn_peer_reset(c)) {
        log_debug("HTTP/2 client %s closed the connection: its %zu stream(s) end",
                  conn_peer_host(c), h->n_streams);
        conn_close(c, reason_client_closed);
        return;
    }
    double bound = c->w->cfg->timeouts.write, now = ev_now(ev);
    if (bound > 0 && now - h->eof_at >= bound) {
        log_info("HTTP/2 client %s half-closed %.0fs ago (timeouts.write): its %zu stream(s) end",
                 conn_peer_host(c), now - h->eof_at, h->n_streams);
        conn_close(c, reason_client_closed);
        return;
    }
    nghttp2_submit_ping(h->ng, NGHTTP2_FLAG_NONE, NULL);
    h2_session_kick(h);
    double next = h->peer_every;
    h->peer_every = next * 2 < PEER_LOOK_MAX ? next * 2 : PEER_LOOK_MAX;
    if (bound > 0 && h->eof_at + bound - now < next)
        next = h->eof_at + bound - now;
    ev_timer_set(t, next, 0.);
    ev_timer_start(ev, t);
}

/* Per-stream deadlines, not the connection's request timer: that one is
 * re-armed by any read, so a PING a second kept a stalled upload (or a
 * trickling header block) alive for good. */
static void deadline_fired(struct ev_loop *ev, ev_timer *t, int revents)
{
    (void)ev;
    (void)revents;
    h2_session_arm_deadlines(t->data);
}

void h2_session_arm_deadlines(h2_session *h)
{
    conn *c = h->c;
    struct ev_loop *ev = c->w->loop.ev;
    if (c->state == CONN_CLOSED)
        return;
    double now = ev_now(ev);
    double next = h2_stream_deadlines(h, now);
    if (c->state == CONN_CLOSED)
        return;
    ev_timer_stop(ev, &h->deadline);
    if (next > 0) {
        ev_timer_set(&h->deadline, next - now > 0.001 ? next - now : 0.001, 0.);
        ev_timer_start(ev, &h->deadline);
    }
}

void h2_session_kick(h2_session *h)
{
    /* The pump runs from conn_flush (on_written) at the safe point: never
     * inside nghttp2's callbacks. An empty queue still gets there. */
    conn *c = h->c;
    if (c->state == CONN_CLOSED)
        return;
    if (c->write_blocked)
        return; /* the write watcher calls on_written once the socket takes more */
    conn_schedule_flush(c);
}

void h2_session_streams_changed(h2_session *h)
{
    conn *c = h->c;
    if (c->state != CONN_WAIT_REQUEST && c->state != CONN_ACTIVE)
        return;
    conn_set_state(c, h->n_streams ? CONN_ACTIVE : CONN_WAIT_REQUEST);
    if (!h->n_streams && h->goaway)
        conn_close_after_write(c);
}

static void h2_goaway(h2_session *h, uint32_t code)
{
    if (h->goaway && code == NGHTTP2_NO_ERROR)
        return;
    h->goaway = 1;
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ng),
                          code, NULL, 0);
}

/* ---- nghttp2 callbacks (inside mem_recv / mem_send: no app code, no pump) ---- */

static void count_provoked_reset(h2_session *h);

/*
 * RFC 9113 5.1.1: a client's new stream ids only grow, and a HEADERS that
 * opens none of them is a connection error. nghttp2 drops a HEADERS for a
 * stream it no longer knows without a word (it may be a late frame on a
 * stream we reset, which 5.1 says to ignore): so ignored only shortly
 * after a reset of ours, else PROTOCOL_ERROR. The one case that matters
 * most: after stream 2^31-1 every HEADERS has an old id.
 */
static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud)
{
    h2_session *h = ud;
    if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1) || h->end_reason)
        return 0;
    if (hd->stream_id > h->max_stream_id) {
        h->max_stream_id = hd->stream_id;
        return 0;
    }
    if (nghttp2_session_find_stream(ng, hd->stream_id))
        return 0; /* trailers, or nghttp2's own answer for a closed stream */
    if (h->rst_sent_at && ev_now(h->c->w->loop.ev) - h->rst_sent_at < LATE_FRAMES_SECONDS)
        return 0;
    log_info("HTTP/2 client %s: HEADERS on stream %d after stream %d; GOAWAY PROTOCOL_ERROR",
             conn_peer_host(h->c), hd->stream_id, h->max_stream_id);
    h->goaway = 1;
    h->end_reason = reason_protocol_error;
    nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
    return 0;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_session *h = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (f->hd.stream_id == INT32_MAX && !h->goaway) {
        /* The client's last stream id (5.1.1): it must open a new
         * connection for more; say so now, as a drain would. */
        h->goaway = 1;
        nghttp2_submit_goaway(ng, NGHTTP2_FLAG_NONE, INT32_MAX, NGHTTP2_NO_ERROR, NULL, 0);
    }
    if (h2_session_busy(h) >= h->c->w->cfg->limits.http2_max_streams) {
        /* Apps of reset streams still run: no more of them until they finish. */
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
        if (h->c->w->stats)
            shm_add(&h->c->w->stats->h2_refused, 1);
        /* Not spent from the rapid-reset budget: the client may not know of
         * the apps still running, and it stayed within our SETTINGS (past
         * them, nghttp2 refuses the stream itself: on_invalid_frame). */
        return 0;
    }
    h2_stream *st = h2_stream_new(h, f->hd.stream_id);
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
    h->in_head = st;
    if (h->c->w->stats)
        shm_add(&h->c->w->stats->h2_streams, 1);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    (void)flags;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers of a request: not passed on (PAGI has no request trailers) */
    h2_session *h = ud;
    /* A block's fields come one call each, right after on_begin_headers. */
    h2_stream *st = h->in_head && h->in_head->id == f->hd.stream_id
                        ? h->in_head
                        : nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    int rv = st ? h2_stream_header(st, name, nl, value, vl) : 0;
    if (rv)
        count_provoked_reset(h); /* nghttp2 resets the stream */
    return rv;
}

/* One more event in a one-second window: 1 once count passes max in it. */
static int over_rate(h2_session *h, double *window, unsigned *count, size_t max)
{
    double now = ev_now(h->c->w->loop.ev);
    if (now - *window >= 1.0) {
        *window = now;
        *count = 0;
    }
    return ++*count > max;
}

/* The client attacks (what: for the log): GOAWAY ENHANCE_YOUR_CALM, once. */
static void end_calm(h2_session *h, const char *what)
{
    if (h->goaway && h->end_reason)
        return;
    log_warn("HTTP/2 client %s %s; GOAWAY ENHANCE_YOUR_CALM", conn_peer_host(h->c), what);
    h->goaway = 1;
    h->end_reason = reason_protocol_error;
    nghttp2_session_terminate_session(h->ng, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* A reset the client provoked (a stream error in its frames, a stream
 * past SETTINGS_MAX_CONCURRENT_STREAMS, a header block not taken) spends
 * the rapid-reset budget as its own RST_STREAM does: a stream opened only
 * to be reset by us costs the server as much (3,000 a second on one
 * connection, before this). Our other resets (timeouts, an app's failure,
 * an answer that needs no more of the body) are not the client's to spend. */
static void count_provoked_reset(h2_session *h)
{
    if (over_rate(h, &h->reset_window, &h->resets, h->c->w->cfg->limits.http2_max_resets) &&
        !h->goaway)
        end_calm(h, "provoked more stream resets a second than limits.http2_max_resets");
}

/* A frame that asks for nothing (empty DATA, PRIORITY): a flood of them ends the session. */
static void count_idle_frame(h2_session *h)
{
    if (over_rate(h, &h->idle_window, &h->idle_frames, H2_MAX_IDLE_FRAMES_PER_SECOND))
        end_calm(h, "sent more than " STR(
                        H2_MAX_IDLE_FRAMES_PER_SECOND) " empty DATA or PRIORITY frames a second");
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_session *h = ud;
    h2_stream *st =
        f->hd.stream_id ? nghttp2_session_get_stream_user_data(ng, f->hd.stream_id) : NULL;
    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
        if (st && f->headers.cat == NGHTTP2_HCAT_REQUEST)
            h2_stream_headers_done(st, (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0);
        else if (st && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            h2_stream_request_end(st);
        break;
    case NGHTTP2_DATA:
        if (st && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            h2_stream_request_end(st);
        else if (f->hd.length == 0)
            count_idle_frame(h);
        break;
    case NGHTTP2_PRIORITY:
        count_idle_frame(h);
        break;
    case NGHTTP2_RST_STREAM:
        if (h->c->w->stats)
            shm_add(&h->c->w->stats->h2_resets, 1);
        /* Every client reset of a stream still open counts: an answer
         * started (a stream, an SSE) ties up as much as an unanswered one. */
        if (st)
            h2_stream_peer_reset(st);
        if (st &&
            over_rate(h, &h->reset_window, &h->resets, h->c->w->cfg->limits.http2_max_resets) &&
            !h->goaway)
            end_calm(h, "reset more streams a second than limits.http2_max_resets");
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (!st) {
        nghttp2_session_consume(ng, id, len);
        return 0;
    }
    return h2_stream_data(st, data, len) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

/* Once per connection, whether or not its GOAWAY ever gets framed. */
static void count_calm(h2_session *h)
{
    if (h->calm_counted)
        return;
    h->calm_counted = 1;
    if (h->c->w->stats)
        shm_add(&h->c->w->stats->h2_calm, 1);
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    h2_session *h = ud;
    /* A GOAWAY with an error, ours or nghttp2's own (a connection error it
     * found, e.g. DATA on stream 0): the session ends for that reason. */
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR && !h->end_reason)
        h->end_reason = reason_protocol_error;
    /* Every ENHANCE_YOUR_CALM exit is counted here, whoever decided it: our
     * rapid-reset limit, or nghttp2's own (floods, SETTINGS entries). */
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM)
        count_calm(h);
    if (f->hd.type == NGHTTP2_RST_STREAM)
        h->rst_sent_at = ev_now(h->c->w->loop.ev);
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        h2_stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
        if (st)
            h2_stream_response_sent(st);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud)
{
    (void)ud;
    h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    h2_stream_closed(st, code);
    return 0;
}

static int on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *f, int err, void *ud)
{
    (void)ng;
    h2_session *h = ud;
    log_debug("HTTP/2 from %s: invalid frame: %s", conn_peer_host(h->c), nghttp2_strerror(err));
    /* On a stream, nghttp2 has just queued its RST_STREAM (a stream error:
     * a WINDOW_UPDATE overflowing the window, a malformed request, ...). */
    if (f->hd.stream_id)
        count_provoked_reset(h);
    return 0;
}

/*
 * Over TLS a DATA frame is one record's worth (16384 bytes with its 9-byte
 * header), so the output queue's frames line up with TLS records and each
 * is encrypted where it lies, not gathered across two frames first.
 */
static ssize_t data_length(nghttp2_session *ng, uint8_t type, int32_t id, int32_t conn_window,
                           int32_t stream_window, uint32_t max_frame, void *ud)
{
    (void)ng;
    (void)type;
    (void)id;
    (void)conn_window;
    (void)stream_window;
    h2_session *h = ud;
    /* nghttp2 clamps the answer to the windows and the peer's frame size. */
    return h->c->tls ? 16384 - 9 : (ssize_t)max_frame;
}

/* ---- the session ---- */

static int h2_session_new(conn *c)
{
    h2_session *h = calloc(1, sizeof *h);
    if (!h)
        return -1;
    h->c = c;
    ev_init(&h->deadline, deadline_fired);
    h->deadline.data = h;
    ev_init(&h->stall, stall_check);
    h->stall.data = h;
    ev_init(&h->peer, peer_look);
    h->peer.data = h;
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        free(h);
        return -1;
    }
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        free(h);
        return -1;
    }
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
    /* DATA payloads go to c->out without nghttp2's copy (h2_stream_send_data). */
    nghttp2_session_callbacks_set_send_data_callback(cb, h2_stream_send_data);
    nghttp2_session_callbacks_set_data_source_read_length_callback(cb, data_length);
    /* WINDOW_UPDATEs follow the app's receives (nghttp2_session_consume). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_settings(opt, H2_MAX_SETTINGS);
    nghttp2_option_set_max_outbound_ack(opt, H2_MAX_OUTBOUND_ACK);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
    /* Newer nghttp2 has its own CONTINUATION cap and reset rate limit; say
     * ours where the API exists (Debian 12's 1.52 carries the CONTINUATION
     * cap as a security fix without the setter). */
#if NGHTTP2_VERSION_NUM >= 0x013d00
    nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
#endif
#if NGHTTP2_VERSION_NUM >= 0x013900
    nghttp2_option_set_stream_reset_rate_limit(opt, 2 * c->w->cfg->limits.http2_max_resets,
                                               c->w->cfg->limits.http2_max_resets);
#endif
    int rv = nghttp2_session_server_new3(&h->ng, cb, h, opt, h2_mem());
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (rv != 0) {
        free(h);
        return -1;
    }
    const pagid_limits *l = &c->w->cfg->limits;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)l->http2_max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)l->http2_stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)l->max_header_size},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1}, /* websockets (RFC 8441) */
    };
    if (nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0 ||
        nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)l->http2_connection_window) != 0) {
        nghttp2_session_del(h->ng);
        free(h);
        return -1;
    }
    c->proto_state = h;
    return 0;
}

int h2_conn_start(conn *c)
{
    if (c->proto->release)
        c->proto->release(c);
    c->proto = &h2_proto;
    if (h2_session_new(c) < 0)
        return -1;
    if (c->w->stats)
        shm_add(&c->w->stats->h2_connections, 1);
    h2_session_kick(sess(c)); /* our SETTINGS go first */
    return 0;
}

/*
 * HTTP/2 as a connection's alt_proto (conn.c asks, knowing no protocol):
 * after the TLS handshake when ALPN chose h2; on cleartext with prior
 * knowledge when the first bytes are the client preface (a prefix of it:
 * undecided; anything else: HTTP/1.1 keeps the connection).
 */
static conn_claim h2_claim(conn *c, conn_claim_point point)
{
    if (point == CONN_CLAIM_AT_HANDSHAKE) {
        if (!c->tls || !tls_conn_alpn_h2(c->tls))
            return CONN_CLAIM_DECLINED;
    } else {
        size_t n = buf_size(&c->in), k = sizeof preface - 1;
        size_t m = n < k ? n : k;
        if (c->tls || memcmp(buf_head(&c->in), preface, m) != 0)
            return CONN_CLAIM_DECLINED;
        if (n < k)
            return CONN_CLAIM_UNDECIDED;
    }
    return h2_conn_start(c) < 0 ? CONN_CLAIM_FAILED : CONN_CLAIM_TAKEN;
}

/* ---- conn_proto ---- */

static conn_fate h2_on_input(conn *c)
{
    h2_session *h = sess(c);
    h2_session_prune_gone(h);
    ssize_t rv =
        nghttp2_session_mem_recv(h->ng, (const uint8_t *)buf_head(&c->in), buf_size(&c->in));
    buf_consume(&c->in, buf_size(&c->in));
    if (rv < 0) {
        /* A bad preface, a flood nghttp2 gave up on, or our callback's
         * failure: say GOAWAY if we still can, then close. */
        log_info("HTTP/2 from %s: %s", conn_peer_host(c), nghttp2_strerror((int)rv));
        /* A flood is an attack, not a broken client: ENHANCE_YOUR_CALM, and
         * counted (a client not reading may never let the GOAWAY be framed).
         * The CONTINUATION cap (CVE-2024-28182) is in Debian 12's nghttp2 as a
         * security fix. */
        int flood = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
        if (flood)
            count_calm(h);
        nghttp2_session_terminate_session(h->ng, flood ? NGHTTP2_ENHANCE_YOUR_CALM
                                                       : NGHTTP2_PROTOCOL_ERROR);
        h->goaway = 1;
        h->end_reason = reason_protocol_error;
        h2_pump(h);
        if (conn_fate_of(c) == CONN_GONE)
            return CONN_GONE;
        conn_close_after_write(c);
        return CONN_ALIVE;
    }
    if (h->end_reason) {
        /* We ended the session in this read (rapid reset): start no app. */
        h2_pump(h);
        return conn_fate_of(c);
    }
    h2_stream_start_ready(h); /* apps run: any of them may close the connection */
    if (conn_fate_of(c) == CONN_GONE)
        return CONN_GONE;
    h2_session_arm_deadlines(h);
    if (conn_fate_of(c) == CONN_GONE)
        return CONN_GONE;
    if (c->w->draining)
        h2_goaway(h, NGHTTP2_NO_ERROR);
    h2_pump(h);
    return conn_fate_of(c);
}

/* A half-close is not a cancel: requests already whole are answered (the
 * client reads on), GOAWAY says no more, and the connection closes when
 * the last stream ends; unless the client turns out to have gone for good,
 * or the answers take longer than timeouts.write (peer_look). */
static conn_fate h2_on_eof(conn *c)
{
    h2_session *h = sess(c);
    if (h->eof_at)
        return CONN_ALIVE;
    h->eof_at = ev_now(c->w->loop.ev);
    h2_stream_peer_eof(h);
    if (conn_fate_of(c) == CONN_GONE)
        return CONN_GONE;
    h2_goaway(h, NGHTTP2_NO_ERROR);
    if (h->n_streams) {
        nghttp2_submit_ping(h->ng, NGHTTP2_FLAG_NONE, NULL); /* the first look's probe */
        h->peer_every = PEER_LOOK_FIRST;
        ev_timer_set(&h->peer, PEER_LOOK_FIRST, 0.);
        ev_timer_start(c->w->loop.ev, &h->peer);
    }
    h2_pump(h);
    if (conn_fate_of(c) == CONN_GONE)
        return CONN_GONE;
    if (!h->n_streams)
        conn_close_after_write(c);
    return CONN_ALIVE;
}

static conn_fate h2_on_written(conn *c)
{
    h2_pump(sess(c));
    if (conn_fate_of(c) == CONN_GONE)
        return CONN_GONE;
    /* Reading stopped while the output was full (h2_wants_read): it resumes
     * once the socket took it, or a WINDOW_UPDATE would never be read. */
    conn_refresh(c);
    return CONN_ALIVE;
}

static int h2_wants_read(const conn *c)
{
    /* A client that does not read our answers is not read either: its
     * requests and pings would only pile up answers. */
    return outq_buffered(&c->out) < out_cap(c);
}

static int h2_waiting_for_input(const conn *c)
{
    (void)c;
    return 0; /* each stream has its own deadline (h2_session_arm_deadlines) */
}

static void h2_on_close(conn *c, const char *reason)
{
    h2_session *h = sess(c);
    /* A session we terminated (protocol error, flood, rapid reset) closes
     * by conn_close_after_write, which knows no reason: its streams' apps
     * hear why here, not server_shutdown. */
    if (h && reason == reason_server_shutdown && h2_stream_going_away(h)) {
        /* Open websockets' Close 1001, as HTTP/1.1 websockets get at shutdown. */
        for (int i = 0; i < 4; i++) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(h->ng, &data);
            if (n <= 0 || outq_append(&c->out, data, (size_t)n) < 0)
                break;
        }
        conn_write_last(c);
    }
    if (h)
        h2_stream_abort_all(h, reason ? reason : h->end_reason);
}

static void h2_on_header_timeout(conn *c)
{
    conn_close(c, reason_client_timeout);
}

static void h2_on_request_timeout(conn *c)
{
    h2_session_arm_deadlines(sess(c)); /* not armed for HTTP/2; the streams' own timer is */
}

/* After our GOAWAY the client may still be sending (WINDOW_UPDATE, PING,
 * a request crossing the GOAWAY): a close with its bytes unread would be
 * a TCP reset that can destroy the final frames, so linger. */
static int h2_peer_may_send(const conn *c)
{
    (void)c;
    return 1;
}

static void h2_on_drain(conn *c)
{
    h2_session *h = sess(c);
    h2_goaway(h, NGHTTP2_NO_ERROR);
    if (!h->n_streams) {
        h2_pump(h);
        if (c->state != CONN_CLOSED)
            conn_close_after_write(c);
        return;
    }
    h2_session_kick(h);
}

/* No stream is open: GOAWAY (NO_ERROR, the last stream we processed) and
 * close once it is written, as on a drain, rather than a bare FIN the client
 * could mistake for a lost request. */
static void h2_on_idle_timeout(conn *c, const char *reason)
{
    h2_session *h = sess(c);
    if (!h || h->n_streams) {
        conn_close(c, reason);
        return;
    }
    h2_goaway(h, NGHTTP2_NO_ERROR);
    h2_pump(h);
    if (c->state != CONN_CLOSED)
        conn_close_after_write(c);
}

static void h2_release(conn *c)
{
    h2_session *h = sess(c);
    if (!h)
        return;
    ev_timer_stop(c->w->loop.ev, &h->stall);
    ev_timer_stop(c->w->loop.ev, &h->deadline);
    ev_timer_stop(c->w->loop.ev, &h->peer);
    h2_stream_free_all(h);
    nghttp2_session_del(h->ng);
    free(h);
    c->proto_state = NULL;
}

const conn_proto h2_proto = {
    .name = "h2",
    .on_input = h2_on_input,
    .on_eof = h2_on_eof,
    .on_written = h2_on_written,
    .wants_read = h2_wants_read,
    .waiting_for_input = h2_waiting_for_input,
    .on_close = h2_on_close,
    .on_header_timeout = h2_on_header_timeout,
    .on_request_timeout = h2_on_request_timeout,
    .on_plain_http = NULL,
    .peer_may_send = h2_peer_may_send,
    .init = NULL,
    .release = h2_release,
    .on_drain = h2_on_drain,
    .on_idle_timeout = h2_on_idle_timeout,
    .claim = h2_claim,
};

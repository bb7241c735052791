/*
 * websocket_io.c - the WebSocket protocol on any carrier (HTTP/1.1's
 * ws_proto in websocket_h1.c, an HTTP/2 stream in h2_websocket.c): reading
 * frames as their bytes arrive (payloads unmasked, inflated and UTF-8
 * checked in place, so a bad byte fails the connection at once), the
 * receive queue and its limits, the close handshake, keepalive pings, the
 * idle and close timers, and the one place where the connection's end turns
 * into websocket.disconnect.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "worker/core/access_log.h"
#include "worker/core/memtrim.h"
#include "worker/core/pagi_buf.h"
#include "worker/core/reason.h"
#include "websocket_int.h"

/* Input kept while the app has not answered the handshake yet. */
#define HANDSHAKE_INPUT_MAX 65536

static struct ev_loop *ws_loop(const ws_conn *ws)
{
    return ws->w->loop.ev;
}

/* ---- output ---- */

int ws_queue_frame(ws_conn *ws, unsigned opcode, const void *data, size_t len)
{
    int rsv1 = 0;
    const void *payload = data;
    if (ws->pmd && (opcode == WS_OP_TEXT || opcode == WS_OP_BINARY)) {
        buf *tmp = &ws->w->scratch;
        buf_reset(tmp);
        if (ws_deflate_message(ws->pmd, data, len, tmp) < 0)
            return -1;
        payload = buf_head(tmp);
        len = buf_size(tmp);
        rsv1 = 1;
    }
    uint8_t hdr[WS_MAX_HEADER];
    size_t n = ws_frame_write_header(hdr, 1, rsv1, opcode, len);
    if (ws->car->write(ws, hdr, n) < 0 || (len && ws->car->write(ws, payload, len) < 0))
        return -1;
    ws->car->kick(ws);
    return 0;
}

int ws_queue_frame_buf(ws_conn *ws, unsigned opcode, pagi_buf *b)
{
    if (ws->pmd || !ws->car->write_buf) /* compressed, or a carrier that copies anyway */
        return ws_queue_frame(ws, opcode, pagi_buf_data(b) ? pagi_buf_data(b) : "",
                              pagi_buf_len(b));
    uint8_t hdr[WS_MAX_HEADER];
    size_t n = ws_frame_write_header(hdr, 1, 0, opcode, pagi_buf_len(b));
    if (ws->car->write(ws, hdr, n) < 0 || ws->car->write_buf(ws, b) < 0)
        return -1;
    ws->car->kick(ws);
    return 0;
}

int ws_queue_close(ws_conn *ws, int code, const void *reason, size_t reason_len)
{
    uint8_t p[WS_MAX_CONTROL_PAYLOAD];
    size_t n = 0;
    if (code) {
        if (reason_len > WS_MAX_CLOSE_REASON)
            reason_len = WS_MAX_CLOSE_REASON;
        p[0] = (uint8_t)(code >> 8);
        p[1] = (uint8_t)code;
        if (reason_len)
            memcpy(p + 2, reason, reason_len);
        n = 2 + reason_len;
    }
    return ws_queue_frame(ws, WS_OP_CLOSE, p, n);
}

void ws_record_end(ws_conn *ws, int code, const char *word, const void *text, size_t text_len)
{
    if (ws->end_set)
        return;
    ws->end_set = 1;
    ws->end_code = code;
    ws->end_word = word;
    if (text_len > WS_MAX_CLOSE_REASON)
        text_len = WS_MAX_CLOSE_REASON;
    /* Out of memory the reason is dropped; the code still tells how it ended. */
    ws->end_text = text_len ? malloc(text_len) : NULL;
    if (ws->end_text)
        memcpy(ws->end_text, text, text_len);
    ws->end_text_len = ws->end_text ? text_len : 0;
}

/* ---- timers ---- */

/* websocket.keepalive: pings every interval; a pong must come within timeout (0 = never). */
struct ws_keepalive {
    ev_timer ping, pong;
    double timeout;
};

static void ws_arm_close_timer(ws_conn *ws)
{
    double t = ws->w->cfg->timeouts.ws_close;
    if (t <= 0 || ev_is_active(&ws->timer))
        return;
    ev_timer_set(&ws->timer, t, 0.);
    ev_timer_start(ws_loop(ws), &ws->timer);
}

static void ws_stop_keepalive(ws_conn *ws)
{
    if (!ws->ka)
        return;
    ev_timer_stop(ws_loop(ws), &ws->ka->ping);
    ev_timer_stop(ws_loop(ws), &ws->ka->pong);
}

/* Go to CLOSING: the last bytes (our Close, if any) leave, then the transport ends, within
 * ws_close. */
static void ws_finish(ws_conn *ws)
{
    ws->state = WS_CLOSING;
    ws->stalled = 0;
    ws_stop_keepalive(ws);
    ev_timer_stop(ws_loop(ws), &ws->timer); /* the idle deadline gives way to ws_close */
    ws_arm_close_timer(ws);
    ws->car->finish(ws);
}

/* Fail the connection (RFC 6455 7.1.7): our Close with the code, then close. */
static void ws_fail(ws_conn *ws, int code, const char *why)
{
    int port = 0;
    const char *host = ws->car->peer(ws, &port);
    log_info("websocket %s:%d: %s; closing with %d", host, port, why, code);
    const char *word = code == WS_CLOSE_POLICY           ? reason_queue_overflow
                       : code == WS_CLOSE_TOO_BIG        ? reason_body_too_large
                       : code == WS_CLOSE_INTERNAL_ERROR ? reason_server_error
                                                         : reason_protocol_error;
    ws_record_end(ws, code, word, NULL, 0);
    if (ws->state == WS_OPEN)
        ws_queue_close(ws, code, why, strlen(why));
    ws_finish(ws);
}

static void ws_on_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    ws_conn *ws = t->data;
    if (ws->state == WS_OPEN && ws->stalled) {
        /* The queue held its bytes for timeouts.ws_queue and the app took nothing: the spec's
         * "application is not draining and the inbound queue limit is reached". */
        ws_fail(ws, WS_CLOSE_POLICY, "receive queue overflow");
        return;
    }
    if (ws->state == WS_OPEN) {
        /* ws_idle: a courtesy Close ("going away"); the app hears of a timeout (1006). */
        ws_record_end(ws, WS_CLOSE_ABNORMAL, reason_idle_timeout, NULL, 0);
        ws_queue_close(ws, WS_CLOSE_GOING_AWAY, "idle timeout", 12);
        ws_finish(ws);
        return;
    }
    /* ws_close: the peer did not complete the close handshake (or read our last bytes). */
    ws_record_end(ws, WS_CLOSE_ABNORMAL, reason_client_timeout, NULL, 0);
    ws->car->abort(ws, reason_client_timeout);
}

static void ws_on_ping_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    ws_conn *ws = t->data;
    if (ws->state != WS_OPEN)
        return;
    ws_queue_frame(ws, WS_OP_PING, "pagid", 5);
    if (ws->ka->timeout > 0 && !ev_is_active(&ws->ka->pong)) {
        ev_timer_set(&ws->ka->pong, ws->ka->timeout, 0.);
        ev_timer_start(ev, &ws->ka->pong);
    }
}

static void ws_on_pong_timer(struct ev_loop *ev, ev_timer *t, int revents)
{
    ws_conn *ws = t->data;
    /* The spec: no pong in time -> close with 1006, reason keepalive_timeout. */
    ws_record_end(ws, WS_CLOSE_ABNORMAL, reason_keepalive_timeout, NULL, 0);
    ws->car->abort(ws, reason_keepalive_timeout);
}

void ws_timers_init(ws_conn *ws)
{
    ev_init(&ws->timer, ws_on_timer);
    ws->timer.data = ws;
    ws->timers_init = 1;
}

static void ws_timers_stop(ws_conn *ws)
{
    if (!ws->timers_init)
        return;
    ev_timer_stop(ws_loop(ws), &ws->timer);
    ws_stop_keepalive(ws);
    free(ws->ka);
    ws->ka = NULL;
}

static void ws_touch_idle(ws_conn *ws)
{
    double t = ws->w->cfg->timeouts.ws_idle;
    if (t <= 0 || ws->state != WS_OPEN)
        return;
    ws->timer.repeat = t;
    ev_timer_again(ws_loop(ws), &ws->timer);
}

void ws_set_keepalive(ws_conn *ws, double interval, double timeout)
{
    ws_stop_keepalive(ws);
    if (interval <= 0 && !ws->ka)
        return;
    if (!ws->ka) {
        ws->ka = calloc(1, sizeof *ws->ka);
        if (!ws->ka) {
            log_error("websocket.keepalive: out of memory; no pings");
            return;
        }
        ev_init(&ws->ka->ping, ws_on_ping_timer);
        ev_init(&ws->ka->pong, ws_on_pong_timer);
        ws->ka->ping.data = ws->ka->pong.data = ws;
    }
    ws->ka->timeout = timeout;
    if (interval > 0) {
        ev_timer_set(&ws->ka->ping, interval, interval);
        ev_timer_start(ws_loop(ws), &ws->ka->ping);
    }
}

/* ---- the app side's view of the session ---- */

void ws_opened(ws_conn *ws)
{
    ws_touch_idle(ws);
    /* Frames that came with or right after the upgrade are read once the accept is on its way. */
    ws->input_pending = buf_size(ws->car->input(ws)) > 0;
    ws->car->refresh(ws);
}

void ws_close_from_app(ws_conn *ws, int code, const char *reason, size_t reason_len)
{
    if (ws->state != WS_OPEN)
        return;
    ws_queue_close(ws, code, reason, reason_len);
    ws->state = WS_CLOSE_SENT;
    /* Frames held back for queue room may hold the peer's Close: read them at the flush. */
    ws->paused = 0;
    ws->stalled = 0;
    ws->input_pending = buf_size(ws->car->input(ws)) > 0;
    ws_stop_keepalive(ws);
    ev_timer_stop(ws_loop(ws), &ws->timer); /* the idle deadline gives way to ws_close */
    ws_arm_close_timer(ws);
    ws->car->refresh(ws);
}

static struct ev_loop *ws_loop_or_null(const ws_conn *ws)
{
    return ws->owner ? ws->w->loop.ev : NULL;
}

void ws_drop_queue(ws_conn *ws)
{
    memtrim_note(ws_loop_or_null(ws), ws->q_bytes);
    while (ws->q_head) {
        ws_msg *m = ws->q_head;
        ws->q_head = m->next;
        free(m);
    }
    ws->q_tail = NULL;
    ws->q_count = 0;
    ws->q_bytes = 0;
}

void ws_maybe_release(ws_conn *ws)
{
    if (ws->owner || !(ws->app_finished || ws->disconnect_taken))
        return;
    pagi_scope *s = ws->s;
    ws_drop_queue(ws);
    memtrim_note(NULL, ws->msg.cap);
    buf_free(&ws->msg);
    free(ws->end_text);
    free(ws->ka);
    free(ws->ctl);
    free(ws);
    scope_detach(s);
}

/* ---- incoming messages ---- */

static size_t max_message(const ws_conn *ws)
{
    return ws->w->cfg->limits.max_ws_message_size;
}

static int queue_full(const ws_conn *ws)
{
    size_t limit = ws->w->cfg->limits.max_receive_queue;
    return ws->q_count >= (limit ? limit : 1);
}

/* The queue holds its byte bound: the next message waits in the socket (TCP pushes back). */
static int queue_bytes_full(const ws_conn *ws)
{
    return ws->q_count > 0 && ws->q_bytes >= ws->w->cfg->limits.max_receive_queue_size;
}

/* Stop reading until the app takes a message. On the byte bound the app has timeouts.ws_queue to
 * take one, else the connection fails with 1008 (a peer's Close behind the unread messages would
 * otherwise never be seen, and nothing else would end the wait). */
static void ws_pause(ws_conn *ws)
{
    ws->paused = 1;
    double t = ws->w->cfg->timeouts.ws_queue;
    if (!queue_bytes_full(ws) || t <= 0 || ws->stalled)
        return;
    ws->stalled = 1;
    ev_timer_stop(ws_loop(ws), &ws->timer);
    ev_timer_set(&ws->timer, t, 0.);
    ev_timer_start(ws_loop(ws), &ws->timer);
}

void ws_queue_taken(ws_conn *ws, size_t len)
{
    ws->q_bytes -= len;
    /* Only big messages count: small ones come back from malloc's caches,
     * and trimming for ordinary traffic would stall the loop for nothing. */
    if (len >= MEMTRIM_BIG)
        memtrim_note(ws_loop_or_null(ws), len);
    if (!ws->paused || !ws->owner || ws->state == WS_GONE)
        return;
    ws->paused = 0;
    if (ws->stalled) {
        ws->stalled = 0;
        ev_timer_stop(ws_loop(ws), &ws->timer);
        ws_touch_idle(ws);
    }
    /* Called from a delivery: read at the next flush, not inside the app's callback chain. */
    ws->input_pending = 1;
    ws->car->kick(ws);
    ws->car->refresh(ws);
}

static int ws_on_payload(ws_conn *ws, const uint8_t *p, size_t n)
{
    if (ws->state != WS_OPEN)
        return 0; /* after our Close, data is read only to find the peer's Close */
    size_t before = buf_size(&ws->msg);
    if (ws->msg_compressed) {
        int rc = ws_inflate_feed(ws->pmd, p, n, &ws->msg, max_message(ws));
        if (rc == WS_INFLATE_TOO_BIG) {
            ws_fail(ws, WS_CLOSE_TOO_BIG, "message too big");
            return -1;
        }
        if (rc == WS_INFLATE_NOMEM) {
            ws_fail(ws, WS_CLOSE_INTERNAL_ERROR, "out of memory");
            return -1;
        }
        if (rc != WS_INFLATE_OK) {
            ws_fail(ws, WS_CLOSE_INVALID_PAYLOAD, "invalid compressed data");
            return -1;
        }
    } else if (buf_append(&ws->msg, p, n) < 0) {
        ws_fail(ws, WS_CLOSE_INTERNAL_ERROR, "out of memory");
        return -1;
    }
    if (ws->msg_text &&
        utf8_feed(&ws->u8, buf_head(&ws->msg) + before, buf_size(&ws->msg) - before) < 0) {
        ws_fail(ws, WS_CLOSE_INVALID_PAYLOAD, "invalid UTF-8 in a text message");
        return -1;
    }
    return 0;
}

static int ws_on_message_end(ws_conn *ws)
{
    ws->in_message = 0;
    if (ws->state != WS_OPEN)
        return 0;
    if (ws->msg_compressed) {
        size_t before = buf_size(&ws->msg);
        int rc = ws_inflate_end(ws->pmd, &ws->msg, max_message(ws));
        if (rc != WS_INFLATE_OK) {
            ws_fail(ws,
                    rc == WS_INFLATE_TOO_BIG ? WS_CLOSE_TOO_BIG
                    : rc == WS_INFLATE_NOMEM ? WS_CLOSE_INTERNAL_ERROR
                                             : WS_CLOSE_INVALID_PAYLOAD,
                    rc == WS_INFLATE_TOO_BIG ? "message too big"
                    : rc == WS_INFLATE_NOMEM ? "out of memory"
                                             : "invalid compressed data");
            return -1;
        }
        if (ws->msg_text &&
            utf8_feed(&ws->u8, buf_head(&ws->msg) + before, buf_size(&ws->msg) - before) < 0) {
            ws_fail(ws, WS_CLOSE_INVALID_PAYLOAD, "invalid UTF-8 in a text message");
            return -1;
        }
    }
    if (ws->msg_text && !utf8_complete(&ws->u8)) {
        ws_fail(ws, WS_CLOSE_INVALID_PAYLOAD, "text message ends inside a UTF-8 sequence");
        return -1;
    }
    if (queue_full(ws)) {
        ws_fail(ws, WS_CLOSE_POLICY, "receive queue overflow");
        return -1;
    }
    size_t len = buf_size(&ws->msg);
    ws_msg *m = malloc(sizeof *m + len);
    if (!m) {
        ws_fail(ws, WS_CLOSE_INTERNAL_ERROR, "out of memory");
        return -1;
    }
    m->next = NULL;
    m->is_text = ws->msg_text;
    m->len = len;
    if (len)
        memcpy(m->data, buf_head(&ws->msg), len);
    if (ws->q_tail)
        ws->q_tail->next = m;
    else
        ws->q_head = m;
    ws->q_tail = m;
    ws->q_count++;
    ws->q_bytes += len;
    /* The assembly buffer is kept only for a next message already arriving, and never when
     * big: an idle connection holds no message memory. */
    if (ws->msg.cap > 65536 || buf_size(ws->car->input(ws)) == 0) {
        if (ws->msg.cap > 65536)
            memtrim_note(ws_loop(ws), ws->msg.cap);
        buf_free(&ws->msg);
    } else
        buf_reset(&ws->msg);
    scope_poke_receive(ws->s);
    return 0;
}

static void ws_on_control(ws_conn *ws, const uint8_t *payload, size_t len)
{
    switch (ws->fh.opcode) {
    case WS_OP_PING:
        if (ws->state == WS_OPEN)
            ws_queue_frame(ws, WS_OP_PONG, payload, len);
        break;
    case WS_OP_PONG:
        /* Any pong proves the peer alive; unsolicited ones need nothing else. */
        if (ws->ka)
            ev_timer_stop(ws_loop(ws), &ws->ka->pong);
        break;
    case WS_OP_CLOSE: {
        int code;
        const uint8_t *reason;
        size_t rlen;
        int bad = ws_close_parse(payload, len, &code, &reason, &rlen);
        if (bad) {
            ws_fail(ws, bad,
                    bad == WS_CLOSE_INVALID_PAYLOAD ? "close reason is not UTF-8"
                                                    : "invalid close code");
            return;
        }
        ws_record_end(ws, code, NULL, reason, rlen);
        /* Echo the peer's code and reason (RFC 6455 5.5.1), as the reference does. */
        if (ws->state == WS_OPEN)
            ws_queue_close(ws, code == WS_CLOSE_NO_STATUS ? 0 : code, reason, rlen);
        ws_finish(ws);
        break;
    }
    }
}

/* Read every complete piece of frame in the input. */
static void ws_read_frames(ws_conn *ws)
{
    while (ws->owner && (ws->state == WS_OPEN || ws->state == WS_CLOSE_SENT)) {
        buf *in = ws->car->input(ws);
        uint8_t *p = (uint8_t *)in->data + in->off;
        size_t avail = buf_size(in);
        if (!ws->in_frame) {
            if (!ws->in_message && ws->state == WS_OPEN &&
                (queue_bytes_full(ws) || (queue_full(ws) && scope_receive_waiting(ws->s)))) {
                /* The next message waits in the socket for room: always when the queue holds
                 * its bytes (memory stays bounded, TCP pushes back on the peer); for the
                 * message count, only when the app is draining (a receive is pending), else
                 * the message that does not fit is an overflow (1008). */
                ws_pause(ws);
                break;
            }
            int r = ws_frame_parse_header(p, avail, &ws->fh);
            if (r == 0)
                break;
            if (r < 0) {
                ws_fail(ws, WS_CLOSE_PROTOCOL_ERROR, "invalid frame length encoding");
                return;
            }
            ws_frame_ctx fc = {.deflate = ws->pmd != NULL, .in_message = ws->in_message};
            const char *why = "";
            int code = ws_frame_check(&ws->fh, &fc, &why);
            if (code) {
                ws_fail(ws, code, why);
                return;
            }
            if (ws->fh.opcode == WS_OP_TEXT || ws->fh.opcode == WS_OP_BINARY) {
                ws->in_message = 1;
                ws->msg_text = ws->fh.opcode == WS_OP_TEXT;
                ws->msg_compressed = ws->fh.rsv1;
                ws->msg_wire = 0;
                buf_reset(&ws->msg);
                utf8_reset(&ws->u8);
            }
            /* Refuse an oversized frame from its header, before buffering any of it. Deflate
             * never grows data by more than a little, so a compressed message much larger on
             * the wire than the limit is refused too (it could inflate to nothing, forever). */
            if (ws->fh.opcode < 8 && ws->state == WS_OPEN) {
                uint64_t max = max_message(ws);
                ws->msg_wire += ws->fh.len;
                if (ws->msg_compressed ? ws->msg_wire > max + max / 8 + 1024
                                       : buf_size(&ws->msg) + ws->fh.len > max) {
                    ws_fail(ws, WS_CLOSE_TOO_BIG, "message too big");
                    return;
                }
            }
            /* A control frame's payload is kept apart (it may come between a
             * message's fragments); its room exists only while it is read. */
            if (ws->fh.opcode >= 8 && ws->fh.len > 0 && !ws->ctl &&
                !(ws->ctl = malloc(WS_MAX_CONTROL_PAYLOAD))) {
                ws->car->abort(ws, reason_server_error);
                return;
            }
            buf_consume(in, (size_t)r);
            ws->in_frame = 1;
            ws->frame_done = 0;
            ws->ctl_len = 0;
            ws_touch_idle(ws);
            continue;
        }
        uint64_t remaining = ws->fh.len - ws->frame_done;
        size_t take = remaining < avail ? (size_t)remaining : avail;
        if (take)
            ws_unmask(p, take, ws->fh.mask, ws->frame_done);
        if (ws->fh.opcode >= 8) {
            if (take) /* an empty control frame has no room allocated */
                memcpy(ws->ctl + ws->ctl_len, p, take);
            ws->ctl_len += take;
        } else if (take && ws_on_payload(ws, p, take) < 0) {
            return;
        }
        buf_consume(in, take);
        ws->frame_done += take;
        if (ws->frame_done < ws->fh.len)
            break;
        ws->in_frame = 0;
        if (ws->fh.opcode >= 8) {
            uint8_t payload[WS_MAX_CONTROL_PAYLOAD];
            size_t len = ws->ctl_len;
            if (len)
                memcpy(payload, ws->ctl, len);
            free(ws->ctl);
            ws->ctl = NULL;
            ws_on_control(ws, payload, len);
        }
        else if (ws->fh.fin && ws_on_message_end(ws) < 0)
            return;
    }
}

/* ---- the carrier's events ---- */

/* Whether to read frames now. While an open websocket wants no input (reading paused for queue
 * room, or the output to a peer that does not read piles up) its frames are left unread in the
 * input and read once that passes: over HTTP/1.1 the socket is not read meanwhile, over HTTP/2
 * the bytes already came and the stream window, not credited for them, holds the peer. */
static int read_now(ws_conn *ws)
{
    if (ws->state == WS_OPEN && !ws_wants_input(ws)) {
        ws->input_pending = buf_size(ws->car->input(ws)) > 0;
        return 0;
    }
    ws->input_pending = 0;
    return 1;
}

void ws_input(ws_conn *ws)
{
    switch (ws->state) {
    case WS_OPEN:
    case WS_CLOSE_SENT:
        if (read_now(ws))
            ws_read_frames(ws);
        break;
    case WS_CLOSING:
        buf_reset(ws->car->input(ws));
        break;
    default:
        break; /* before the accept, frames wait in the input (bounded by ws_wants_input) */
    }
}

void ws_peer_gone(ws_conn *ws)
{
    if (ws->input_pending && (ws->state == WS_OPEN || ws->state == WS_CLOSE_SENT)) {
        /* Frames that came before the end count first: maybe a Close among them. */
        ws->input_pending = 0;
        ws_read_frames(ws);
        if (!ws->owner || ws->state == WS_GONE)
            return;
    }
    switch (ws->state) {
    case WS_HANDSHAKE:
    case WS_DENYING:
    case WS_OPEN:
    case WS_CLOSE_SENT:
        /* Gone without a Close frame (or without answering ours). */
        ws_record_end(ws, WS_CLOSE_ABNORMAL, reason_client_closed, NULL, 0);
        ws->car->abort(ws, reason_client_closed);
        break;
    default:
        break; /* closing anyway: the last bytes are written, then the transport ends */
    }
}

void ws_flushed(ws_conn *ws)
{
    if (ws->input_pending && (ws->state == WS_OPEN || ws->state == WS_CLOSE_SENT) && read_now(ws))
        ws_read_frames(ws);
}

int ws_wants_input(const ws_conn *ws)
{
    switch (ws->state) {
    case WS_HANDSHAKE:
    case WS_DENYING:
        return buf_size(ws->car->input((ws_conn *)ws)) < HANDSHAKE_INPUT_MAX;
    case WS_OPEN:
        /* Pongs we owe a peer that does not read must not grow without bound. */
        return !ws->paused && ws->car->queued(ws) < 4 * ws->w->cfg->high_watermark;
    case WS_CLOSE_SENT:
        return 1;
    default:
        return 0;
    }
}

void ws_transport_closed(ws_conn *ws, const char *reason)
{
    if (ws->state == WS_GONE)
        return;
    pagi_scope *s = ws->s;
    ws_timers_stop(ws);
    if (ws->state == WS_DENIED && !reason) {
        /* The refusal was written in full: that is this exchange's normal end. */
        scope_mark_complete(s);
    } else {
        ws_record_end(ws, WS_CLOSE_ABNORMAL, reason ? reason : reason_client_closed, NULL, 0);
        scope_disconnect(s, ws->end_word ? ws->end_word : reason_client_closed);
    }
    ws->car->ended(ws, scope_is_complete(s) ? NULL
                       : ws->end_word       ? ws->end_word
                                            : reason_client_closed);
    ws->state = WS_GONE;
    ws_deflate_free(ws->pmd);
    ws->pmd = NULL;
    /* The message being assembled (the transport notes its own buffers). */
    memtrim_note(ws_loop(ws), ws->msg.cap);
    buf_free(&ws->msg);
}

void ws_detach(ws_conn *ws)
{
    if (!ws || !ws->owner)
        return;
    if (ws->state != WS_GONE)
        ws_transport_closed(ws, NULL);
    ws->owner = NULL;
    ws_maybe_release(ws);
}

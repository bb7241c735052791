/*
 * pagi_easy_group.c - broadcast groups of pagi_easy.h: a group owns each
 * member scope's receive loop and counts its sends in flight, so a member is
 * finished only after its disconnect arrived and its last send callback ran.
 * Slow members (send buffer at the high water mark) get the group's policy.
 * A broadcast is one refcounted pagi_buf shared by every websocket member;
 * the worker's drain notice closes every member of every group at once. A
 * group fed from pub/sub channels owns their subscriptions (pubsub.h's
 * scope-less kind, the one call here beyond pagi.h).
 */
#include <pagi/pagi_easy.h>

#include <stdlib.h>
#include <string.h>

#include "pagi_easy_member.h"
#include "pagi_easy_policy.h"
#include "pubsub.h"
#include "scope.h"
#include "worker/core/handle.h"

/* A channel the group is fed from (pagi_group_subscribe): owned by the group. */
typedef struct group_feed {
    struct group_feed *next;
    pagi_group *g;
    pagi_subscription *sub; /* scope-less: ended by the group only */
    char *event;            /* owned; the sse event name, or NULL */
    char channel[];
} group_feed;

struct pagi_group {
    pagi_group_policy policy;
    member *head;
    size_t count;
    unsigned long slow;
    char *drain_event, *drain_data; /* owned; the sse members' last event on a drain */
    size_t drain_len;
    int has_drain_event;
    group_feed *feeds;
};

/*
 * Every member whose events the layer drives, in any group or closing: the
 * worker's drain notice is per scope, but it must close all of them at once,
 * and a notice queued for a member that has since ended or left finds it
 * gone from here. One list per process is enough: a worker runs one loop.
 */
static member *live_members;

static void member_recv(pagi_scope *s, const pagi_event *ev, void *ud);

static void live_link(member *m)
{
    m->aprev = NULL;
    m->anext = live_members;
    if (live_members)
        live_members->aprev = m;
    live_members = m;
    m->in_live = 1;
}

static void live_unlink(member *m)
{
    if (!m->in_live)
        return;
    if (m->aprev)
        m->aprev->anext = m->anext;
    else
        live_members = m->anext;
    if (m->anext)
        m->anext->aprev = m->aprev;
    m->aprev = m->anext = NULL;
    m->in_live = 0;
}

static void member_leave(member *m)
{
    pagi_group *g = m->g;
    if (g == NULL)
        return;
    if (m->prev)
        m->prev->next = m->next;
    else
        g->head = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->prev = m->next = NULL;
    m->g = NULL;
    g->count--;
}

/* The end of a member: the core rule is no finish before the last send callback. */
static void member_maybe_done(member *m)
{
    if (!m->disconnected || m->in_flight > 0)
        return;
    pagi_scope *s = m->s;
    const char *err = m->finish_err;
    member_leave(m);
    live_unlink(m);
    member_held_clear(m);
    int orphan = m->orphan;
    member_free(m);
    if (!orphan) {
        scope_set_owner(s, NULL, NULL); /* our own finish: no owner callback */
        pagi_scope_finish(s, err);
    }
}

/* pagi_group_leave's end: the scope goes back to the app once the group's
 * last send on it completed (the app may then finish it at once). */
static void member_handback_maybe(member *m)
{
    if (!m->leaving || m->in_flight > 0 || m->in_message)
        return;
    pagi_scope *s = m->s;
    pagi_group_left_cb cb = m->left_cb;
    void *ud = m->left_ud;
    member_free(m);
    cb(s, ud);
}

/*
 * The scope was finished behind the group's back (the app answered it with
 * pagi_respond, finished it, or the worker exited): the member leaves at
 * once, so nothing of the group touches the scope after its release. It is
 * freed here, or by the last of its send callbacks still queued (they hold
 * the scope) or when on_message returns.
 */
static void member_scope_finished(pagi_scope *s, void *ud)
{
    member *m = ud;
    scope_misuse_call(s, "pagi_scope_finish",
                      "scope %p was finished while a member of a group: the group drops it "
                      "(pagi_group_leave hands a member back)",
                      (void *)s);
    member_leave(m);
    live_unlink(m);
    member_held_clear(m);
    m->orphan = 1;
    m->disconnected = 1;
    if (m->in_flight == 0 && !m->in_message)
        member_free(m);
}

static void member_sent(pagi_scope *s, const char *err, void *ud);

/*
 * Put one message on the member's connection; counted until its callback.
 * A websocket member queues b itself (a reference, not a copy), so every
 * member of a broadcast shares the one buffer; an sse event is formatted.
 */
static int member_write(member *m, msg_kind kind, const char *event, pagi_buf *b)
{
    pagi_event ev;
    int rc;
    m->in_flight++;
    if (m->is_ws) {
        ev = pagi_event_init(PAGI_EV_WEBSOCKET_SEND);
        ev.is_text = kind != MSG_BYTES;
        rc = pagi_send_buf(m->s, &ev, b, member_sent, m);
    } else {
        const char *data = pagi_buf_data(b);
        ev = pagi_event_init(PAGI_EV_SSE_SEND);
        ev.data = (pagi_str){data ? data : "", pagi_buf_len(b)};
        if (kind == MSG_EVENT && event != NULL)
            ev.event = (pagi_str){event, strlen(event)};
        rc = pagi_send(m->s, &ev, member_sent, m);
    }
    if (rc != 0) {
        m->in_flight--;
        return -1; /* e.g. invalid UTF-8 or a newline in the event name: this member only */
    }
    return 0;
}

static void member_close(member *m, int code, const char *reason)
{
    member_leave(m);
    member_held_clear(m);
    if (m->closing || m->disconnected)
        return;
    m->closing = 1;
    pagi_event ev;
    if (m->is_ws) {
        ev = pagi_event_init(PAGI_EV_WEBSOCKET_CLOSE);
        ev.code = code;
        if (reason != NULL)
            ev.reason = (pagi_str){reason, strlen(reason)};
    } else {
        ev = pagi_event_init(PAGI_EV_SSE_CLOSE);
    }
    m->in_flight++;
    if (pagi_send(m->s, &ev, member_sent, m) != 0)
        m->in_flight--;
    /* The pending receive delivers the disconnect, which ends the member. */
}

static int member_is_slow(const member *m)
{
    return pagi_transport_buffered_amount(m->s) >= pagi_transport_high_water_mark(m->s);
}

/* 1 when sent or held for the member, 0 when skipped, -1 on OOM. */
static int member_offer(member *m, msg_kind kind, const char *event, pagi_buf *b)
{
    pagi_group *g = m->g;
    if (m->closing || m->disconnected || (kind == MSG_BYTES && !m->is_ws))
        return 0;
    if (!m->ready) { /* a websocket not accepted yet: its messages wait */
        if (m->early_count >= EARLY_MAX) {
            m->g->slow++;
            return 0;
        }
        return member_early_add(m, kind, event, b) == 0 ? 1 : -1;
    }
    switch (easy_policy_decide(g->policy, member_is_slow(m), m->has_pending)) {
    case EASY_SEND:
        return member_write(m, kind, event, b) == 0;
    case EASY_HOLD:
        if (!member_is_slow(m) && m->in_flight == 0) {
            /* Nothing left to trigger a flush: the newer message wins now. */
            g->slow++;
            member_pending_clear(m);
            return member_write(m, kind, event, b) == 0;
        }
        if (m->has_pending)
            g->slow++; /* the held message is replaced: one lost */
        return member_pending_set(m, kind, event, b) == 0 ? 1 : -1;
    case EASY_DROP:
        g->slow++;
        return 0;
    case EASY_CLOSE:
        g->slow++;
        member_close(m, 1008, "too slow");
        return 0;
    }
    return 0;
}

static void member_sent(pagi_scope *s, const char *err, void *ud)
{
    (void)s;
    (void)err; /* a failed send ends in a disconnect, which the receive loop sees */
    member *m = ud;
    m->in_flight--;
    if (m->orphan) {
        if (m->in_flight == 0 && !m->in_message)
            member_free(m);
        return;
    }
    if (m->leaving) {
        member_handback_maybe(m);
        return;
    }
    if (m->has_pending && !m->closing && !m->disconnected && !member_is_slow(m)) {
        /* Drained: the latest held message goes out now. */
        msg_kind k = m->pend_kind;
        char *e = m->pend_event;
        pagi_buf *b = m->pend_buf;
        m->pend_event = NULL;
        m->pend_buf = NULL;
        m->has_pending = 0;
        member_write(m, k, e, b);
        free(e);
        pagi_buf_unref(b);
    }
    member_maybe_done(m);
}

/* The drain notice's close: 1001, or the group's last sse event then the end. */
static void member_drain_close(member *m)
{
    pagi_group *g = m->g;
    if (g != NULL && g->has_drain_event && !m->is_ws && m->ready && !m->closing) {
        pagi_buf *b = pagi_buf_wrap(g->drain_data, g->drain_len, NULL, NULL);
        if (b != NULL) /* sse data is formatted during the send: b is not kept */
            member_write(m, MSG_EVENT, g->drain_event, b);
        pagi_buf_unref(b);
    }
    member_close(m, 1001, "server shutting down");
}

/* The worker started draining: every member of every group, at once. */
static void member_on_server_drain(pagi_scope *s, void *ud)
{
    (void)s;
    (void)ud;
    for (member *m = live_members; m != NULL; m = m->anext)
        if (!m->closing && !m->disconnected)
            member_drain_close(m);
}

static void member_end(member *m, const char *err)
{
    member_leave(m);
    member_held_clear(m);
    m->disconnected = 1;
    m->finish_err = err;
    member_maybe_done(m);
}

static void member_recv(pagi_scope *s, const pagi_event *ev, void *ud)
{
    member *m = ud;

    switch (ev->type) {
    case PAGI_EV_WEBSOCKET_DISCONNECT:
    case PAGI_EV_SSE_DISCONNECT:
        member_end(m, NULL);
        return;
    case PAGI_EV_WEBSOCKET_CONNECT:
        if (!m->closing) {
            pagi_event acc = pagi_event_init(PAGI_EV_WEBSOCKET_ACCEPT);
            acc.headers = m->accept_headers;
            acc.header_count = m->accept_header_count;
            if (pagi_send(s, &acc, NULL, NULL) != 0) {
                member_end(m, "pagi_group_join: websocket.accept refused");
                return;
            }
            m->ready = 1;
            while (m->early_head != NULL && !m->closing) {
                early_msg *e = m->early_head;
                m->early_head = e->next;
                if (m->early_head == NULL)
                    m->early_tail = NULL;
                m->early_count--;
                member_write(m, e->kind, e->event, e->buf);
                free(e->event);
                pagi_buf_unref(e->buf);
                free(e);
            }
        }
        break;
    case PAGI_EV_WEBSOCKET_RECEIVE:
        /* The callback may close this member, free the group or leave: m
         * stays valid because only the disconnect (below, later) can free
         * it, and a leave waits for in_message to clear. */
        if (m->g != NULL && m->on_message != NULL) {
            m->in_message = 1;
            m->on_message(m->g, s, ev->is_text ? ev->text : ev->bytes, ev->is_text, m->ud);
            m->in_message = 0;
            if (m->orphan) { /* the app finished s in on_message */
                if (m->in_flight == 0)
                    member_free(m);
                return;
            }
            if (m->leaving) {
                member_handback_maybe(m); /* no receive: the scope is the app's */
                return;
            }
        }
        break;
    default: /* sse.request body: not for a group */
        break;
    }
    if (pagi_receive(s, member_recv, m) != 0)
        member_end(m, "pagi_group: receive refused");
}

pagi_group *pagi_group_new(pagi_group_policy policy)
{
    if (policy != PAGI_GROUP_CONFLATE && policy != PAGI_GROUP_DROP &&
        policy != PAGI_GROUP_DISCONNECT)
        return NULL;
    pagi_group *g = calloc(1, sizeof *g);
    if (g != NULL)
        g->policy = policy;
    return g;
}

static void feed_free(group_feed *f)
{
    pagi_unsubscribe(f->sub); /* its callback never runs again */
    free(f->event);
    free(f);
}

void pagi_group_free(pagi_group *g)
{
    if (g == NULL)
        return;
    while (g->feeds != NULL) {
        group_feed *f = g->feeds;
        g->feeds = f->next;
        feed_free(f);
    }
    while (g->head != NULL)
        member_close(g->head, 1001, "going away");
    free(g->drain_event);
    free(g->drain_data);
    free(g);
}

int pagi_group_set_drain_event(pagi_group *g, const char *event, const char *data, size_t len)
{
    if (g == NULL || (len > 0 && data == NULL))
        return -1;
    char *e = event ? strdup(event) : NULL;
    char *d = malloc(len ? len : 1);
    if ((event && e == NULL) || d == NULL) {
        free(e);
        free(d);
        return -1;
    }
    if (len)
        memcpy(d, data, len);
    free(g->drain_event);
    free(g->drain_data);
    g->drain_event = e;
    g->drain_data = d;
    g->drain_len = len;
    g->has_drain_event = 1;
    return 0;
}

int pagi_group_join_headers(pagi_group *g, pagi_scope *s, const pagi_header *headers,
                            size_t header_count, pagi_group_msg_cb on_message, void *ud)
{
    if (!scope_live(s, "pagi_group_join"))
        return -1;
    /* Already driven by a group: refused, and s stays the member it is. */
    if (scope_owner(s) != NULL) {
        scope_misuse_call(s, "pagi_group_join",
                          "scope %p is already a member of a group (joined twice?)", (void *)s);
        return scope_fail(s, "pagi_group_join: the scope is already a member of a group");
    }
    const char *why = NULL;
    pagi_scope_type t = pagi_scope_type_of(s);
    if (g == NULL)
        why = "pagi_group_join: no group";
    else if (t != PAGI_SCOPE_WEBSOCKET && t != PAGI_SCOPE_SSE)
        why = "pagi_group_join: not a websocket or sse scope";
    else if (header_count > 0 && headers == NULL)
        why = "pagi_group_join: NULL headers";
    if (why != NULL) {
        scope_misuse_call(s, "pagi_group_join", "%s", why + sizeof "pagi_group_join: " - 1);
        pagi_scope_finish(s, why);
        return -1;
    }
    member *m = calloc(1, sizeof *m);
    if (m == NULL) {
        pagi_scope_finish(s, "pagi_group_join: out of memory");
        return -1;
    }
    m->s = s;
    m->on_message = on_message;
    m->ud = ud;
    m->is_ws = t == PAGI_SCOPE_WEBSOCKET;
    if (!m->is_ws) {
        pagi_event start = pagi_event_init(PAGI_EV_SSE_START);
        start.status = 200;
        start.headers = headers;
        start.header_count = header_count;
        if (pagi_send(s, &start, NULL, NULL) != 0) {
            member_free(m);
            pagi_scope_finish(s, pagi_scope_error(s));
            return -1;
        }
        m->ready = 1;
    } else if (header_count > 0) {
        m->accept_headers = easy_headers_copy(headers, header_count);
        m->accept_header_count = header_count;
        if (m->accept_headers == NULL) {
            member_free(m);
            pagi_scope_finish(s, "pagi_group_join: out of memory");
            return -1;
        }
    }
    if (pagi_receive(s, member_recv, m) != 0) {
        member_free(m);
        pagi_scope_finish(s, pagi_scope_error(s));
        return -1;
    }
    m->g = g;
    m->next = g->head;
    if (m->next)
        m->next->prev = m;
    g->head = m;
    g->count++;
    live_link(m);
    scope_set_owner(s, member_scope_finished, m);
    /* Joining a draining worker: refused at once (a websocket close before
     * the accept is a 403; an sse stream ends), like every other member. */
    if (pagi_server_draining(s))
        member_drain_close(m);
    else
        pagi_scope_on_server_drain(s, member_on_server_drain, NULL);
    return 0;
}

int pagi_group_join(pagi_group *g, pagi_scope *s, pagi_group_msg_cb on_message, void *ud)
{
    return pagi_group_join_headers(g, s, NULL, 0, on_message, ud);
}

/*
 * The member of g whose scope is s. Only pointers are compared, so a stale
 * s is never read here; a group holds no member whose scope was finished
 * (member_scope_finished), so a match is live. A handle that is no live
 * scope at all is fn's misuse (logged once); a live scope that is not (or
 * no longer) a member is not: a disconnect may have ended it meanwhile.
 */
static member *find_member(pagi_group *g, pagi_scope *s, const char *fn)
{
    if (g == NULL)
        return NULL;
    for (member *m = g->head; m != NULL; m = m->next)
        if (m->s == s)
            return m;
    (void)scope_live(s, fn);
    return NULL;
}

void pagi_group_close(pagi_group *g, pagi_scope *member_scope, int code, const char *reason)
{
    member *m = find_member(g, member_scope, "pagi_group_close");
    if (m != NULL)
        member_close(m, code, reason);
}

int pagi_group_leave(pagi_group *g, pagi_scope *member_scope, pagi_group_left_cb cb, void *ud)
{
    member *m = find_member(g, member_scope, "pagi_group_leave");
    if (m == NULL || cb == NULL)
        return -1;
    scope_set_owner(m->s, NULL, NULL); /* the app's again */
    member_leave(m);
    live_unlink(m);
    member_held_clear(m);
    m->leaving = 1;
    m->left_cb = cb;
    m->left_ud = ud;
    if (!m->in_message)
        pagi_receive_cancel(m->s); /* inside on_message none is pending */
    member_handback_maybe(m);
    return 0;
}

size_t pagi_group_size(const pagi_group *g)
{
    return g ? g->count : 0;
}

unsigned long pagi_group_slow_count(const pagi_group *g)
{
    return g ? g->slow : 0;
}

static int group_offer(pagi_group *g, msg_kind kind, const char *event, const char *data,
                       size_t len)
{
    int n = 0, oom = 0;
    member *next;
    if (g == NULL || (len > 0 && data == NULL)) {
        handle_misuse(0, "pagi_group_send", "%s", g ? "NULL data" : "NULL group");
        return -1;
    }
    if (g->head == NULL)
        return 0;
    pagi_buf *b = easy_buf_copy(data, len);
    if (b == NULL)
        return -1;
    /* A DISCONNECT close unlinks the member: walk with the next saved. */
    for (member *m = g->head; m != NULL; m = next) {
        next = m->next;
        int r = member_offer(m, kind, event, b);
        if (r < 0)
            oom = 1;
        else
            n += r;
    }
    pagi_buf_unref(b); /* the members' queued sends hold their own references */
    return oom ? -1 : n;
}

int pagi_group_send_text(pagi_group *g, const char *data, size_t len)
{
    return group_offer(g, MSG_TEXT, NULL, data, len);
}

int pagi_group_send_bytes(pagi_group *g, const void *data, size_t len)
{
    return group_offer(g, MSG_BYTES, NULL, data, len);
}

int pagi_group_send_event(pagi_group *g, const char *event, const char *data, size_t len)
{
    return group_offer(g, MSG_EVENT, event, data, len);
}

int pagi_group_send_to(pagi_group *g, pagi_scope *member_scope, const char *event, const char *data,
                       size_t len)
{
    if (len > 0 && data == NULL)
        return -1;
    member *m = find_member(g, member_scope, "pagi_group_send_to");
    if (m == NULL)
        return 0;
    pagi_buf *b = easy_buf_copy(data, len);
    if (b == NULL)
        return -1;
    int r = member_offer(m, event ? MSG_EVENT : MSG_TEXT, event, b);
    pagi_buf_unref(b);
    return r;
}

/*
 * A message on a channel the group is fed from: one broadcast. What slow
 * members did not get of it (dropped, a held message replaced, the message
 * that closed one) is counted on the subscription too, so the server's
 * pub/sub metrics show it with every other drop.
 */
static void feed_message(pagi_subscription *sub, pagi_str channel, const void *data, size_t len,
                         void *ud)
{
    (void)channel;
    group_feed *f = ud;
    pagi_group *g = f->g;
    unsigned long before = g->slow;
    group_offer(g, f->event ? MSG_EVENT : MSG_TEXT, f->event, data, len);
    if (g->slow > before)
        pagi_subscription_count_dropped(sub, (unsigned)(g->slow - before));
}

static group_feed *find_feed(pagi_group *g, const char *channel, group_feed ***prevp)
{
    group_feed **pp = &g->feeds;
    for (; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->channel, channel) == 0)
            break;
    if (prevp != NULL)
        *prevp = pp;
    return *pp;
}

int pagi_group_subscribe(pagi_group *g, pagi_scope *s, const char *channel, const char *event)
{
    if (g == NULL || channel == NULL)
        return -1;
    if (find_feed(g, channel, NULL) != NULL)
        return 0;
    size_t len = strlen(channel);
    group_feed *f = calloc(1, sizeof *f + len + 1);
    if (f == NULL || (event != NULL && (f->event = strdup(event)) == NULL)) {
        free(f);
        return -1;
    }
    memcpy(f->channel, channel, len + 1);
    f->g = g;
    f->sub = pubsub_subscribe_owned(s, channel, feed_message, f);
    if (f->sub == NULL) { /* pagi_scope_error(s) says why */
        free(f->event);
        free(f);
        return -1;
    }
    f->next = g->feeds;
    g->feeds = f;
    return 0;
}

int pagi_group_unsubscribe(pagi_group *g, const char *channel)
{
    group_feed **pp;
    group_feed *f = g != NULL && channel != NULL ? find_feed(g, channel, &pp) : NULL;
    if (f == NULL)
        return -1;
    *pp = f->next;
    feed_free(f);
    return 0;
}

/*
 * pagi_easy_member.h - a broadcast group's member (pagi_easy_group.c) and
 * what it holds back: the CONFLATE slot and the messages offered before a
 * websocket's accept (pagi_easy_member.c), plus the layer's copy helpers.
 */
#ifndef PAGID_PAGI_EASY_MEMBER_H
#define PAGID_PAGI_EASY_MEMBER_H

#include <pagi/pagi_easy.h>

typedef enum msg_kind { MSG_TEXT, MSG_BYTES, MSG_EVENT } msg_kind;

/*
 * One member. Owned by the group layer itself, not by the group: it lives
 * from join until its scope is finished (disconnect seen, no send in flight),
 * which may be after it left the group or the group was freed.
 */
typedef struct member {
    pagi_group *g; /* NULL once it left (closed, disconnected, group freed) */
    pagi_scope *s;
    struct member *prev, *next;   /* in g */
    struct member *aprev, *anext; /* in live_members while the layer drives s */
    int in_live;
    pagi_group_msg_cb on_message;
    void *ud;
    int is_ws;
    int ready;        /* accepted (websocket) or started (sse) */
    int closing;      /* a close was sent: nothing more goes out */
    int disconnected; /* the receive loop ended */
    int in_message;   /* on_message is running: leave must not free m yet */
    int leaving;      /* pagi_group_leave: handed back once nothing is in flight */
    int orphan;       /* its scope was finished by someone else: freed, never finished here */
    pagi_group_left_cb left_cb;
    void *left_ud;
    const char *finish_err;
    unsigned in_flight; /* sends whose callback has not run yet */
    /* CONFLATE: the latest message held back while the member is slow. */
    int has_pending;
    msg_kind pend_kind;
    char *pend_event;   /* owned */
    pagi_buf *pend_buf; /* one reference, shared with the broadcast */
    /* A websocket member's messages offered before its accept (e.g. a
     * snapshot sent right after join), sent in order once accepted. */
    struct early_msg *early_head, *early_tail;
    unsigned early_count;
    /* pagi_group_join_headers on a websocket: the accept's headers (one
     * owned block: the array, then the bytes), sent at websocket.connect. */
    pagi_header *accept_headers;
    size_t accept_header_count;
} member;

typedef struct early_msg {
    struct early_msg *next;
    msg_kind kind;
    char *event;   /* owned */
    pagi_buf *buf; /* one reference */
} early_msg;

/* The accept comes within a loop turn of the join: this bound is only for a
 * flood in between, dropped (and counted) like a slow member's. */
#define EARLY_MAX 256

/** Drop the CONFLATE slot's message (its buffer reference and event name). */
void member_pending_clear(member *m);
/** Hold b (a reference) as the member's one pending message, replacing any; 0 or -1 (OOM). */
int member_pending_set(member *m, msg_kind kind, const char *event, pagi_buf *b);
/** Drop every message waiting for the accept. */
void member_early_clear(member *m);
/** Queue b (a reference) until the accept; 0 or -1 (OOM). */
int member_early_add(member *m, msg_kind kind, const char *event, pagi_buf *b);
/** Everything held for the member: the CONFLATE slot and the pre-accept queue. */
void member_held_clear(member *m);
/** Free m itself (what it holds must be cleared first). */
void member_free(member *m);

/** Headers in one owned block (the array, then the bytes); NULL on OOM. */
pagi_header *easy_headers_copy(const pagi_header *h, size_t n);
/** One copy of data in a buffer freed with its last reference; NULL on OOM. */
pagi_buf *easy_buf_copy(const char *data, size_t len);

#endif

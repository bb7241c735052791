/*
 * outq.c - the output queue (see outq.h). Consecutive memory segments go
 * out in one writev; a file segment goes out with sendfile(2), so a file
 * response never passes through user space.
 */
#include "outq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

/* Small enough that a segment with its header (72 B) is a 1 KiB malloc
 * chunk, which glibc serves from its per-thread cache: a response's segment
 * is allocated and freed per response (an empty queue holds none) at the
 * cost of a few instructions. Bigger appends get a segment of their size. */
#define SEG_MIN_CAP (1024 - sizeof(outq_seg))
#define IOV_MAX_BATCH 64

struct outq_seg {
    outq_seg *next;
    int fd;       /* >= 0: file segment */
    off_t foff;   /* file segment: next offset */
    size_t pos;   /* memory: first unwritten byte; file: unused */
    size_t len;   /* memory: bytes stored; file: bytes left */
    size_t cap;   /* memory capacity; 0 for an external segment (never appended to) */
    const char *ext;             /* external segment: the borrowed bytes, else NULL */
    void (*release)(void *ud);   /* external segment: gives the bytes back */
    void *rel_ud;
    char data[];
};

/* Where a memory segment's bytes are: its own storage or the borrowed buffer. */
static inline const char *seg_bytes(const outq_seg *s) { return s->ext ? s->ext : s->data; }

void outq_init(outq *q) { memset(q, 0, sizeof *q); }

static void seg_free(outq_seg *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->ext && s->release)
        s->release(s->rel_ud);
    free(s);
}

void outq_free(outq *q)
{
    outq_seg *s = q->head;
    while (s) {
        outq_seg *n = s->next;
        seg_free(s);
        s = n;
    }
    free(q->spare);
    memset(q, 0, sizeof *q);
}

static void outq_link(outq *q, outq_seg *s)
{
    s->next = NULL;
    if (q->tail)
        q->tail->next = s;
    else
        q->head = s;
    q->tail = s;
}

/* A file or external segment (no storage of its own) of len bytes, linked at
 * the tail: the caller sets what the bytes are. */
static outq_seg *seg_new(outq *q, size_t len)
{
    outq_seg *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    *s = (outq_seg){.fd = -1, .len = len};
    outq_link(q, s);
    q->buffered += len;
    return s;
}

static outq_seg *mem_seg_new(outq *q, size_t need)
{
    size_t cap = need > SEG_MIN_CAP ? need : SEG_MIN_CAP;
    outq_seg *s;
    if (q->spare && q->spare->cap >= cap) {
        s = q->spare;
        q->spare = NULL;
    } else {
        s = malloc(sizeof *s + cap);
        if (!s)
            return NULL;
        s->cap = cap;
    }
    s->fd = -1;
    s->foff = 0;
    s->pos = s->len = 0;
    s->ext = NULL;
    s->release = NULL;
    s->rel_ud = NULL;
    outq_link(q, s);
    return s;
}

char *outq_reserve(outq *q, size_t n)
{
    outq_seg *t = q->tail;
    if (!t || t->fd >= 0 || t->ext || t->cap - t->len < n) {
        t = mem_seg_new(q, n);
        if (!t)
            return NULL;
    }
    return t->data + t->len;
}

void outq_commit(outq *q, size_t n)
{
    q->tail->len += n;
    q->buffered += n;
}

int outq_append(outq *q, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    /* Fill the tail segment first, then one new segment for the rest. */
    outq_seg *t = q->tail;
    if (t && t->fd < 0 && !t->ext && t->cap > t->len) {
        size_t room = t->cap - t->len;
        size_t k = n < room ? n : room;
        memcpy(t->data + t->len, data, k);
        t->len += k;
        q->buffered += k;
        data = (const char *)data + k;
        n -= k;
        if (n == 0)
            return 0;
    }
    char *w = outq_reserve(q, n);
    if (!w)
        return -1;
    memcpy(w, data, n);
    outq_commit(q, n);
    return 0;
}

int outq_append_file(outq *q, int fd, off_t offset, size_t len)
{
    if (len == 0) {
        close(fd);
        return 0;
    }
    outq_seg *s = seg_new(q, len);
    if (!s)
        return -1;
    s->fd = fd;
    s->foff = offset;
    return 0;
}

int outq_append_ext(outq *q, const void *data, size_t n, void (*release)(void *ud), void *ud)
{
    if (n == 0) {
        if (release)
            release(ud);
        return 0;
    }
    outq_seg *s = seg_new(q, n);
    if (!s)
        return -1;
    s->ext = data;
    s->release = release;
    s->rel_ud = ud;
    return 0;
}

/* Drop the fully written head segment, keeping one memory segment around. */
static void outq_pop(outq *q)
{
    outq_seg *s = q->head;
    q->head = s->next;
    if (!q->head)
        q->tail = NULL;
    if (s->fd < 0 && !s->ext && !q->spare && s->cap <= 4096)
        q->spare = s;
    else
        seg_free(s);
}

static ssize_t sock_writev(void *ctx, const struct iovec *iov, int cnt)
{
    return writev(*(int *)ctx, iov, cnt);
}

static ssize_t sock_sendfile(void *ctx, int fd, off_t *offset, size_t len)
{
    return sendfile(*(int *)ctx, fd, offset, len);
}

outq_result outq_write(outq *q, int sock, size_t *written)
{
    outq_sink sink = {.ctx = &sock, .writev = sock_writev, .sendfile = sock_sendfile};
    return outq_write_sink(q, &sink, written);
}

outq_result outq_write_sink(outq *q, const outq_sink *sink, size_t *written)
{
    *written = 0;
    while (q->head) {
        outq_seg *s = q->head;
        if (s->fd >= 0) {
            ssize_t n = sink->sendfile(sink->ctx, s->fd, &s->foff, s->len);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return (errno == EAGAIN || errno == EWOULDBLOCK) ? OUTQ_AGAIN : OUTQ_ERROR;
            }
            if (n == 0) {
                /* The file shrank under us: the response cannot be completed. */
                errno = EIO;
                return OUTQ_ERROR;
            }
            s->len -= (size_t)n;
            q->buffered -= (size_t)n;
            *written += (size_t)n;
            if (s->len == 0)
                outq_pop(q);
            continue;
        }
        struct iovec iov[IOV_MAX_BATCH];
        int cnt = 0;
        for (outq_seg *m = s; m && m->fd < 0 && cnt < IOV_MAX_BATCH; m = m->next) {
            if (m->len > m->pos) {
                iov[cnt].iov_base = (void *)(seg_bytes(m) + m->pos);
                iov[cnt].iov_len = m->len - m->pos;
                cnt++;
            }
        }
        if (cnt == 0) {
            outq_pop(q);
            continue;
        }
        ssize_t n = sink->writev(sink->ctx, iov, cnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return (errno == EAGAIN || errno == EWOULDBLOCK) ? OUTQ_AGAIN : OUTQ_ERROR;
        }
        size_t left = (size_t)n;
        *written += left;
        q->buffered -= left;
        while (left > 0 && q->head && q->head->fd < 0) {
            outq_seg *m = q->head;
            size_t avail = m->len - m->pos;
            if (left >= avail) {
                left -= avail;
                outq_pop(q);
            } else {
                m->pos += left;
                left = 0;
            }
        }
        /* Drop emptied memory segments at the head (len == pos). */
        while (q->head && q->head->fd < 0 && q->head->pos == q->head->len)
            outq_pop(q);
    }
    /* An empty queue holds no memory: an idle connection or a quiet stream
     * keeps nothing here (the spare only saves a malloc within one burst). */
    free(q->spare);
    q->spare = NULL;
    return OUTQ_DONE;
}

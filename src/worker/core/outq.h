/*
 * outq.h - a connection's output queue: memory segments and file segments
 * (sent with sendfile), written in order. It owns the bytes and the file
 * descriptors queued in it, except external segments: bytes it only borrows
 * and gives back through their release callback (zero-copy sends).
 * buffered() is what pagi.transport reports.
 */
#ifndef PAGID_OUTQ_H
#define PAGID_OUTQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct outq_seg outq_seg;

typedef struct outq {
    outq_seg *head, *tail;
    outq_seg *spare;  /* one emptied memory segment, reused until the queue is empty */
    size_t buffered;  /* bytes not yet written */
} outq;

typedef enum outq_result {
    OUTQ_DONE,    /* everything written */
    OUTQ_AGAIN,   /* socket full; wait for writability */
    OUTQ_ERROR    /* write failed; errno is set */
} outq_result;

void outq_init(outq *q);
/** Free every segment and close every queued file. */
void outq_free(outq *q);
int outq_append(outq *q, const void *data, size_t n);
/** Reserve n bytes at the tail for direct formatting; commit with outq_commit. */
char *outq_reserve(outq *q, size_t n);
void outq_commit(outq *q, size_t n);
/**
 * Queue n bytes at data without copying them. release(ud) runs exactly once:
 * when the bytes are written or when the queue is freed, whichever comes
 * first (release may be NULL). Returns -1 (out of memory) without calling
 * release: the caller keeps what it meant to hand over. n == 0 queues
 * nothing and calls release at once.
 */
int outq_append_ext(outq *q, const void *data, size_t n, void (*release)(void *ud), void *ud);
/** Queue len bytes of fd from offset; the queue takes ownership of fd. */
int outq_append_file(outq *q, int fd, off_t offset, size_t len);
static inline size_t outq_buffered(const outq *q) { return q->buffered; }
/** Write as much as the socket takes; *written gets the byte count. On
 * OUTQ_DONE the queue holds no memory at all. */
outq_result outq_write(outq *q, int sock, size_t *written);

/* Where the bytes go when not straight to a socket (a TLS session): the
 * same contracts as writev(2) and sendfile(2). */
typedef struct outq_sink {
    void *ctx;
    ssize_t (*writev)(void *ctx, const struct iovec *iov, int cnt);
    ssize_t (*sendfile)(void *ctx, int fd, off_t *offset, size_t len);
} outq_sink;

/** outq_write through a sink. */
outq_result outq_write_sink(outq *q, const outq_sink *sink, size_t *written);

#endif

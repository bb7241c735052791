/*
 * buf.h - a growable byte buffer with a read cursor, used for socket input
 * and output. Data lives in [data+off, data+len); consumed bytes are
 * reclaimed lazily by buf_compact so appends stay amortised O(1).
 */
#ifndef PAGID_BUF_H
#define PAGID_BUF_H

#include <stddef.h>
#include <stdarg.h>

typedef struct buf {
    char *data;
    size_t off; /* first unread byte */
    size_t len; /* end of valid bytes */
    size_t cap;
} buf;

#define BUF_INIT {NULL, 0, 0, 0}

static inline size_t buf_size(const buf *b) { return b->len - b->off; }
static inline const char *buf_head(const buf *b) { return b->data + b->off; }

/** Make room for n more bytes at the end; returns the write pointer or NULL. */
char *buf_reserve(buf *b, size_t n);
/** Mark n bytes after buf_reserve as written. */
static inline void buf_commit(buf *b, size_t n) { b->len += n; }
int buf_append(buf *b, const void *p, size_t n);
int buf_append_str(buf *b, const char *s);
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Drop n bytes from the front. */
void buf_consume(buf *b, size_t n);
void buf_reset(buf *b);
/** Release the memory. */
void buf_free(buf *b);

#endif

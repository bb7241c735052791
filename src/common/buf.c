/*
 * buf.c - growable byte buffer (see buf.h). Growth doubles; consumed bytes
 * at the front are moved out of the way only when the tail runs out of room.
 */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *buf_reserve(buf *b, size_t n)
{
    if (b->cap - b->len >= n)
        return b->data + b->len;
    /* Reclaim the consumed prefix first: cheaper than growing. */
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->cap - b->len >= n)
            return b->data + b->len;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > ((size_t)-1) / 2)
            return NULL;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        return NULL;
    b->data = p;
    b->cap = cap;
    return b->data + b->len;
}

int buf_append(buf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    char *w = buf_reserve(b, n);
    if (!w)
        return -1;
    memcpy(w, p, n);
    b->len += n;
    return 0;
}

int buf_append_str(buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof tmp)
        return buf_append(b, tmp, (size_t)n);
    char *w = buf_reserve(b, (size_t)n + 1);
    if (!w)
        return -1;
    va_start(ap, fmt);
    vsnprintf(w, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void buf_consume(buf *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}

void buf_reset(buf *b)
{
    b->off = b->len = 0;
}

void buf_free(buf *b)
{
    if (b->data) /* most buffers freed were never used: skip the call */
        free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}

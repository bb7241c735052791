/*
 * pagi_buf.h - the server's side of pagi_buf (the public half is in pagi.h):
 * queueing a buffer's bytes on a connection's output queue by reference.
 */
#ifndef PAGID_PAGI_BUF_H
#define PAGID_PAGI_BUF_H

#include <pagi/pagi.h>

#include "outq.h"

/** Queue b's bytes on q without copying; the queue holds a reference until
 * they are written or q is freed. 0, or -1 (out of memory, no reference). */
int pagi_buf_queue(pagi_buf *b, outq *q);

/** Is b a live buffer (not NULL, not released)? If not, fn's misuse is logged once. */
int pagi_buf_live(const pagi_buf *b, const char *fn);

#endif

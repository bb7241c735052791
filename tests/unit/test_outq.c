/*
 * test_outq.c - Check suite for src/worker/outq.c over real socketpairs: segment
 * boundaries, reserve/commit, sendfile segments in order, partial writes on a full
 * socket, buffered() accounting, fd ownership, errors, and external (borrowed)
 * segments: written in place, released exactly once, also through pagi_buf.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/core/outq.h"
#include "worker/core/pagi_buf.h"

/* Deterministic, position-dependent bytes: a reordering or gap shows. */
static void pattern(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)((i * 131u + (i >> 8) * 7u + seed) & 0xff);
}

static int sp[2]; /* sp[0]: outq writes here; sp[1]: the test reads */

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    ck_assert_int_eq(fcntl(sp[0], F_SETFL, O_NONBLOCK), 0);
    ck_assert_int_eq(fcntl(sp[1], F_SETFL, O_NONBLOCK), 0);
}

static void teardown(void)
{
    close(sp[0]);
    if (sp[1] >= 0)
        close(sp[1]);
}

/* What the reader received so far. */
typedef struct sink {
    char *p;
    size_t n, cap;
} sink;

static size_t sink_read(sink *k, int fd)
{
    size_t got = 0;
    for (;;) {
        if (k->cap - k->n < 65536) {
            k->cap = k->cap ? k->cap * 2 : 262144;
            k->p = realloc(k->p, k->cap);
            ck_assert_ptr_nonnull(k->p);
        }
        ssize_t r = read(fd, k->p + k->n, k->cap - k->n);
        if (r <= 0)
            break;
        k->n += (size_t)r;
        got += (size_t)r;
    }
    return got;
}

/* Write the whole queue, draining the reader whenever the socket is full. */
static size_t flush_all(outq *q, sink *k)
{
    size_t total = 0;
    for (int rounds = 0; rounds < 100000; rounds++) {
        size_t w = 12345;
        size_t before = outq_buffered(q);
        outq_result r = outq_write(q, sp[0], &w);
        ck_assert_uint_le(w, before);
        ck_assert_uint_eq(outq_buffered(q), before - w);
        total += w;
        if (r == OUTQ_DONE) {
            ck_assert_uint_eq(outq_buffered(q), 0);
            sink_read(k, sp[1]);
            return total;
        }
        ck_assert_int_eq(r, OUTQ_AGAIN);
        sink_read(k, sp[1]);
    }
    ck_abort_msg("outq_write never finished");
    return total;
}

static int tmpfile_with(const char *data, size_t n)
{
    char path[] = "/tmp/pagid-outq-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
    return fd;
}

START_TEST(empty_queue)
{
    outq q;
    outq_init(&q);
    size_t w = 99;
    ck_assert_uint_eq(outq_buffered(&q), 0);
    ck_assert_int_eq(outq_write(&q, sp[0], &w), OUTQ_DONE);
    ck_assert_uint_eq(w, 0);
    ck_assert_int_eq(outq_append(&q, "x", 0), 0);
    ck_assert_uint_eq(outq_buffered(&q), 0);
    outq_free(&q);
}
END_TEST

START_TEST(append_across_segment_boundaries)
{
    enum { N = 7 };
    static const size_t sizes[N] = {1, 10000, 6383, 1, 16384, 3, 40000};
    size_t total = 0;
    for (size_t i = 0; i < N; i++)
        total += sizes[i];
    char *want = malloc(total);
    pattern(want, total, 1);
    outq q;
    outq_init(&q);
    size_t off = 0;
    for (size_t i = 0; i < N; i++) {
        ck_assert_int_eq(outq_append(&q, want + off, sizes[i]), 0);
        off += sizes[i];
        ck_assert_uint_eq(outq_buffered(&q), off);
    }
    sink k = {0};
    ck_assert_uint_eq(flush_all(&q, &k), total);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, want, total) == 0);
    /* An emptied queue keeps no memory (an idle connection holds none). */
    ck_assert_ptr_null(q.head);
    ck_assert_ptr_null(q.spare);

    /* Again after the queue emptied. */
    k.n = 0;
    for (size_t i = 0; i < total; i += 1000)
        ck_assert_int_eq(outq_append(&q, want + i, total - i < 1000 ? total - i : 1000), 0);
    ck_assert_uint_eq(outq_buffered(&q), total);
    ck_assert_uint_eq(flush_all(&q, &k), total);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, want, total) == 0);
    outq_free(&q);
    free(k.p);
    free(want);
}
END_TEST

START_TEST(large_appends)
{
    size_t total = 5 + 100000 + 70000;
    char *want = malloc(total);
    pattern(want, total, 2);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append(&q, want, 5), 0);
    ck_assert_int_eq(outq_append(&q, want + 5, 100000), 0);
    ck_assert_int_eq(outq_append(&q, want + 100005, 70000), 0);
    ck_assert_uint_eq(outq_buffered(&q), total);
    sink k = {0};
    ck_assert_uint_eq(flush_all(&q, &k), total);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, want, total) == 0);
    outq_free(&q);
    free(k.p);
    free(want);
}
END_TEST

START_TEST(reserve_commit)
{
    outq q;
    outq_init(&q);
    char *p = outq_reserve(&q, 100);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(outq_buffered(&q), 0); /* not counted until committed */
    memcpy(p, "hello ", 6);
    outq_commit(&q, 6);
    ck_assert_uint_eq(outq_buffered(&q), 6);
    ck_assert_int_eq(outq_append(&q, "big ", 4), 0);
    /* Nearly fill the segment, then reserve more than what is left. */
    char *fill = malloc(16000);
    memset(fill, '.', 16000);
    ck_assert_int_eq(outq_append(&q, fill, 16000), 0);
    p = outq_reserve(&q, 1000);
    ck_assert_ptr_nonnull(p);
    memset(p, '#', 1000);
    outq_commit(&q, 1000);
    /* A reservation larger than a segment. */
    p = outq_reserve(&q, 50000);
    ck_assert_ptr_nonnull(p);
    memset(p, '+', 50000);
    outq_commit(&q, 20000); /* commit less than reserved */
    ck_assert_int_eq(outq_append(&q, "end", 3), 0);
    size_t total = 6 + 4 + 16000 + 1000 + 20000 + 3;
    ck_assert_uint_eq(outq_buffered(&q), total);
    sink k = {0};
    ck_assert_uint_eq(flush_all(&q, &k), total);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, "hello big ", 10) == 0);
    ck_assert(memcmp(k.p + 10, fill, 16000) == 0);
    for (size_t i = 0; i < 1000; i++)
        ck_assert_int_eq(k.p[16010 + i], '#');
    for (size_t i = 0; i < 20000; i++)
        if (k.p[17010 + i] != '+')
            ck_abort_msg("byte %zu of the reserved block is %d", i, k.p[17010 + i]);
    ck_assert(memcmp(k.p + 37010, "end", 3) == 0);
    outq_free(&q);
    free(fill);
    free(k.p);
}
END_TEST

START_TEST(file_segment_between_memory)
{
    size_t flen = 50000;
    char *fdata = malloc(flen);
    pattern(fdata, flen, 3);
    int fd = tmpfile_with(fdata, flen);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append(&q, "HEAD:", 5), 0);
    ck_assert_int_eq(outq_append_file(&q, fd, 100, 30000), 0);
    ck_assert_int_eq(outq_append(&q, ":TAIL", 5), 0);
    ck_assert_uint_eq(outq_buffered(&q), 30010);
    sink k = {0};
    ck_assert_uint_eq(flush_all(&q, &k), 30010);
    ck_assert_uint_eq(k.n, 30010);
    ck_assert(memcmp(k.p, "HEAD:", 5) == 0);
    ck_assert(memcmp(k.p + 5, fdata + 100, 30000) == 0);
    ck_assert(memcmp(k.p + 30005, ":TAIL", 5) == 0);
    /* The fully sent file segment was released and its fd closed. */
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    outq_free(&q);
    free(k.p);
    free(fdata);
}
END_TEST

START_TEST(two_files_back_to_back)
{
    char a[3000], b[5000];
    pattern(a, sizeof a, 4);
    pattern(b, sizeof b, 5);
    int fa = tmpfile_with(a, sizeof a), fb = tmpfile_with(b, sizeof b);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_file(&q, fa, 0, sizeof a), 0);
    ck_assert_int_eq(outq_append_file(&q, fb, 1000, 4000), 0);
    ck_assert_int_eq(outq_append(&q, "z", 1), 0);
    sink k = {0};
    ck_assert_uint_eq(flush_all(&q, &k), sizeof a + 4000 + 1);
    ck_assert(memcmp(k.p, a, sizeof a) == 0);
    ck_assert(memcmp(k.p + sizeof a, b + 1000, 4000) == 0);
    ck_assert_int_eq(k.p[sizeof a + 4000], 'z');
    outq_free(&q);
    free(k.p);
}
END_TEST

START_TEST(zero_length_file_closes_fd)
{
    int fd = tmpfile_with("abc", 3);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, 0), 0);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    ck_assert_uint_eq(outq_buffered(&q), 0);
    outq_free(&q);
}
END_TEST

/* A small send buffer and a reader that does not read: partial writes. */
START_TEST(partial_writes_full_socket)
{
    int small = 4096;
    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t mlen = 300000, flen = 400000;
    char *m = malloc(mlen), *f = malloc(flen);
    pattern(m, mlen, 6);
    pattern(f, flen, 7);
    int fd = tmpfile_with(f, flen);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append(&q, m, mlen / 2), 0);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, flen), 0);
    ck_assert_int_eq(outq_append(&q, m + mlen / 2, mlen - mlen / 2), 0);
    size_t total = mlen + flen;
    ck_assert_uint_eq(outq_buffered(&q), total);

    size_t w = 0;
    ck_assert_int_eq(outq_write(&q, sp[0], &w), OUTQ_AGAIN);
    ck_assert_uint_gt(w, 0);
    ck_assert_uint_lt(w, total);
    ck_assert_uint_eq(outq_buffered(&q), total - w);
    /* Still full: nothing more goes. */
    size_t w2 = 7;
    ck_assert_int_eq(outq_write(&q, sp[0], &w2), OUTQ_AGAIN);
    ck_assert_uint_eq(w2, 0);
    ck_assert_uint_eq(outq_buffered(&q), total - w);

    sink k = {0};
    size_t rest = flush_all(&q, &k);
    ck_assert_uint_eq(w + rest, total);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, m, mlen / 2) == 0);
    ck_assert(memcmp(k.p + mlen / 2, f, flen) == 0);
    ck_assert(memcmp(k.p + mlen / 2 + flen, m + mlen / 2, mlen - mlen / 2) == 0);
    outq_free(&q);
    free(k.p);
    free(m);
    free(f);
}
END_TEST

/* Many small segments: more than one writev batch of iovecs. */
START_TEST(many_segments_partial)
{
    int small = 4096;
    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t total = 0;
    char *want = malloc(200 * 20000);
    pattern(want, 200 * 20000, 8);
    outq q;
    outq_init(&q);
    /* Alternate reservations that force a new segment each time. */
    for (int i = 0; i < 200; i++) {
        size_t n = 9000 + (size_t)i * 37;
        char *p = outq_reserve(&q, n);
        ck_assert_ptr_nonnull(p);
        memcpy(p, want + total, n);
        outq_commit(&q, n);
        total += n;
    }
    ck_assert_uint_eq(outq_buffered(&q), total);
    sink k = {0};
    ck_assert_uint_eq(flush_all(&q, &k), total);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, want, total) == 0);
    outq_free(&q);
    free(k.p);
    free(want);
}
END_TEST

START_TEST(free_closes_queued_fds)
{
    int f1 = tmpfile_with("one", 3), f2 = tmpfile_with("two!", 4);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append(&q, "x", 1), 0);
    ck_assert_int_eq(outq_append_file(&q, f1, 0, 3), 0);
    ck_assert_int_eq(outq_append_file(&q, f2, 1, 3), 0);
    ck_assert_int_eq(outq_append(&q, "y", 1), 0);
    ck_assert_uint_eq(outq_buffered(&q), 8);
    ck_assert_int_ne(fcntl(f1, F_GETFD), -1);
    ck_assert_int_ne(fcntl(f2, F_GETFD), -1);
    outq_free(&q);
    errno = 0;
    ck_assert_int_eq(fcntl(f1, F_GETFD), -1);
    ck_assert_int_eq(errno, EBADF);
    ck_assert_int_eq(fcntl(f2, F_GETFD), -1);
    ck_assert_uint_eq(outq_buffered(&q), 0);
    /* A freed queue is empty and reusable. */
    ck_assert_int_eq(outq_append(&q, "z", 1), 0);
    ck_assert_uint_eq(outq_buffered(&q), 1);
    outq_free(&q);
}
END_TEST

/* Partly written file segment still closed by outq_free. */
START_TEST(free_after_partial_file_write)
{
    int small = 4096;
    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t flen = 500000;
    char *f = malloc(flen);
    pattern(f, flen, 9);
    int fd = tmpfile_with(f, flen);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, flen), 0);
    size_t w = 0;
    ck_assert_int_eq(outq_write(&q, sp[0], &w), OUTQ_AGAIN);
    ck_assert_uint_gt(w, 0);
    ck_assert_uint_eq(outq_buffered(&q), flen - w);
    outq_free(&q);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
    free(f);
}
END_TEST

START_TEST(closed_peer_is_error)
{
    outq q;
    outq_init(&q);
    close(sp[1]);
    sp[1] = -1;
    ck_assert_int_eq(outq_append(&q, "lost", 4), 0);
    size_t w = 5;
    errno = 0;
    ck_assert_int_eq(outq_write(&q, sp[0], &w), OUTQ_ERROR);
    ck_assert_int_eq(errno, EPIPE);
    ck_assert_uint_eq(w, 0);
    ck_assert_uint_eq(outq_buffered(&q), 4);
    outq_free(&q);
}
END_TEST

START_TEST(closed_peer_file_is_error)
{
    int fd = tmpfile_with("file bytes", 10);
    outq q;
    outq_init(&q);
    close(sp[1]);
    sp[1] = -1;
    ck_assert_int_eq(outq_append_file(&q, fd, 0, 10), 0);
    size_t w = 5;
    ck_assert_int_eq(outq_write(&q, sp[0], &w), OUTQ_ERROR);
    ck_assert_uint_eq(w, 0);
    outq_free(&q);
    ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
}
END_TEST

/* The file is shorter than the queued length: an error, not a spin. */
START_TEST(file_shrank_is_error)
{
    int fd = tmpfile_with("0123456789", 10);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, 20), 0);
    size_t w = 0;
    errno = 0;
    ck_assert_int_eq(outq_write(&q, sp[0], &w), OUTQ_ERROR);
    ck_assert_int_eq(errno, EIO);
    ck_assert_uint_eq(w, 10);
    ck_assert_uint_eq(outq_buffered(&q), 10);
    outq_free(&q);
}
END_TEST

/* ---- external segments ---- */

static int released[8]; /* release count per segment index */

static void count_release(void *ud) { released[(size_t)ud]++; }

START_TEST(ext_mixed_partial_released_once)
{
    memset(released, 0, sizeof released);
    enum { BIG = 3 << 20, SMALL = 777, FLEN = 50000 };
    char *big = malloc(BIG), *small = malloc(SMALL), *f = malloc(FLEN);
    pattern(big, BIG, 3);
    pattern(small, SMALL, 4);
    pattern(f, FLEN, 5);
    int fd = tmpfile_with(f, FLEN);
    size_t total = 4 + BIG + 4 + FLEN + SMALL + 2 + SMALL;
    char *want = malloc(total), *w = want;
    outq q;
    outq_init(&q);
    /* owned, borrowed, owned, file, borrowed, owned, the same bytes again */
    ck_assert_int_eq(outq_append(&q, "head", 4), 0);
    ck_assert_int_eq(outq_append_ext(&q, big, BIG, count_release, (void *)0), 0);
    ck_assert_int_eq(outq_append(&q, "mid!", 4), 0);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, FLEN), 0);
    ck_assert_int_eq(outq_append_ext(&q, small, SMALL, count_release, (void *)1), 0);
    ck_assert_int_eq(outq_append(&q, "\r\n", 2), 0);
    ck_assert_int_eq(outq_append_ext(&q, small, SMALL, count_release, (void *)2), 0);
    ck_assert_uint_eq(outq_buffered(&q), total);
    memcpy(w, "head", 4), w += 4;
    memcpy(w, big, BIG), w += BIG;
    memcpy(w, "mid!", 4), w += 4;
    memcpy(w, f, FLEN), w += FLEN;
    memcpy(w, small, SMALL), w += SMALL;
    memcpy(w, "\r\n", 2), w += 2;
    memcpy(w, small, SMALL);

    /* The socket takes far less than 3 MiB: the big segment is written in parts
     * and stays borrowed (not released) until its last byte is out. */
    sink k = {0};
    size_t wr = 0;
    ck_assert_int_eq(outq_write(&q, sp[0], &wr), OUTQ_AGAIN);
    ck_assert_uint_gt(wr, 0);
    ck_assert_uint_lt(wr, 4 + BIG);
    ck_assert_int_eq(released[0], 0);
    size_t rest = flush_all(&q, &k);
    ck_assert_uint_eq(wr + rest, total);
    sink_read(&k, sp[1]);
    ck_assert_uint_eq(k.n, total);
    ck_assert(memcmp(k.p, want, total) == 0);
    ck_assert_int_eq(released[0], 1);
    ck_assert_int_eq(released[1], 1);
    ck_assert_int_eq(released[2], 1);
    outq_free(&q);
    ck_assert_int_eq(released[0] + released[1] + released[2], 3);
    free(k.p);
    free(want);
    free(big);
    free(small);
    free(f);
}
END_TEST

START_TEST(ext_released_by_free)
{
    memset(released, 0, sizeof released);
    enum { BIG = 2 << 20 };
    char *big = malloc(BIG);
    pattern(big, BIG, 6);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_ext(&q, big, BIG, count_release, (void *)0), 0);
    ck_assert_int_eq(outq_append(&q, "x", 1), 0);
    ck_assert_int_eq(outq_append_ext(&q, "never written", 13, count_release, (void *)1), 0);
    size_t wr = 0;
    ck_assert_int_eq(outq_write(&q, sp[0], &wr), OUTQ_AGAIN);
    ck_assert_uint_lt(wr, BIG);
    ck_assert_int_eq(released[0] + released[1], 0);
    /* the connection ends mid-body: whatever was borrowed goes back, once */
    outq_free(&q);
    ck_assert_int_eq(released[0], 1);
    ck_assert_int_eq(released[1], 1);
    outq_free(&q);
    ck_assert_int_eq(released[0] + released[1], 2);
    free(big);
}
END_TEST

START_TEST(ext_zero_length_and_appends_after)
{
    memset(released, 0, sizeof released);
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_ext(&q, "", 0, count_release, (void *)0), 0);
    ck_assert_int_eq(released[0], 1); /* nothing queued: given back at once */
    ck_assert_uint_eq(outq_buffered(&q), 0);
    /* Appends after a borrowed tail go to a segment of their own, never into
     * the app's bytes (they are const: a write there would fault). */
    static const char lent[] = "borrowed";
    ck_assert_int_eq(outq_append_ext(&q, lent, 8, count_release, (void *)1), 0);
    ck_assert_int_eq(outq_append(&q, "+own", 4), 0);
    char *r = outq_reserve(&q, 3);
    ck_assert_ptr_nonnull(r);
    memcpy(r, "!!!", 3);
    outq_commit(&q, 3);
    sink k = {0};
    flush_all(&q, &k);
    ck_assert_uint_eq(k.n, 15);
    ck_assert(memcmp(k.p, "borrowed+own!!!", 15) == 0);
    ck_assert_int_eq(released[1], 1);
    outq_free(&q);
    free(k.p);
}
END_TEST

static int buf_freed;
static void *buf_freed_ptr;

static void note_free(void *ptr, void *ud)
{
    ck_assert_ptr_eq(ud, (void *)&buf_freed);
    buf_freed++;
    buf_freed_ptr = ptr;
    free(ptr);
}

START_TEST(pagi_buf_shared_by_two_queues)
{
    buf_freed = 0;
    enum { N = 1 << 20 };
    char *p = malloc(N);
    pattern(p, N, 7);
    pagi_buf *b = pagi_buf_wrap(p, N, note_free, &buf_freed);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_eq(pagi_buf_data(b), p);
    ck_assert_uint_eq(pagi_buf_len(b), N);
    outq q1, q2;
    outq_init(&q1);
    outq_init(&q2);
    ck_assert_int_eq(pagi_buf_queue(b, &q1), 0);
    ck_assert_int_eq(pagi_buf_queue(b, &q2), 0);
    pagi_buf_unref(b); /* the app is done with its handle; the queues still hold it */
    ck_assert_int_eq(buf_freed, 0);
    sink k = {0};
    flush_all(&q1, &k); /* q1 written: q2 still borrows */
    ck_assert_uint_eq(k.n, N);
    ck_assert(memcmp(k.p, p, N) == 0);
    ck_assert_int_eq(buf_freed, 0);
    outq_free(&q1);
    ck_assert_int_eq(buf_freed, 0);
    outq_free(&q2); /* q2's connection ended unwritten: the last reference */
    ck_assert_int_eq(buf_freed, 1);
    ck_assert_ptr_eq(buf_freed_ptr, p);
    free(k.p);

    /* an empty buffer queues nothing and keeps no reference */
    b = pagi_buf_wrap(NULL, 0, NULL, NULL);
    ck_assert_ptr_nonnull(b);
    outq_init(&q1);
    ck_assert_int_eq(pagi_buf_queue(b, &q1), 0);
    ck_assert_uint_eq(outq_buffered(&q1), 0);
    pagi_buf_unref(b);
    outq_free(&q1);
    ck_assert_ptr_null(pagi_buf_wrap(NULL, 5, NULL, NULL));
}
END_TEST

/* ---- sinks (outq_write_sink): a fake that takes a few bytes a call ---- */

/* Takes up to step bytes a call; every `every`-th call is EAGAIN (or the
 * error err). Checks the rule a TLS session relies on: after EAGAIN the
 * next call offers the same bytes first, at least as many. */
typedef struct fake_sink {
    size_t step;
    int every, calls, eintr_once, err;
    char *out;
    size_t n, cap;
    char last[65536]; /* what the call that got EAGAIN offered */
    size_t last_len;
    int retry;
    int retries_checked;
} fake_sink;

static ssize_t fake_take(fake_sink *f, const char *offer, size_t len)
{
    if (f->retry) {
        ck_assert_uint_ge(len, f->last_len);
        ck_assert(memcmp(offer, f->last, f->last_len) == 0);
        f->retry = 0;
        f->retries_checked++;
    }
    f->calls++;
    if (f->eintr_once) {
        f->eintr_once = 0;
        errno = EINTR;
        return -1;
    }
    if (f->every && f->calls % f->every == 0) {
        if (f->err) {
            errno = f->err;
            return -1;
        }
        f->last_len = len < sizeof f->last ? len : sizeof f->last;
        memcpy(f->last, offer, f->last_len);
        f->retry = 1;
        errno = EAGAIN;
        return -1;
    }
    size_t k = len < f->step ? len : f->step;
    if (f->n + k > f->cap) {
        f->cap = (f->n + k) * 2;
        f->out = realloc(f->out, f->cap);
        ck_assert_ptr_nonnull(f->out);
    }
    memcpy(f->out + f->n, offer, k);
    f->n += k;
    return (ssize_t)k;
}

static ssize_t fake_writev(void *ctx, const struct iovec *iov, int cnt)
{
    static char flat[65536];
    size_t len = 0;
    for (int i = 0; i < cnt && len < sizeof flat; i++) {
        ck_assert_uint_gt(iov[i].iov_len, 0); /* no empty segment is offered */
        size_t k = iov[i].iov_len < sizeof flat - len ? iov[i].iov_len : sizeof flat - len;
        memcpy(flat + len, iov[i].iov_base, k);
        len += k;
    }
    return fake_take(ctx, flat, len);
}

static ssize_t fake_sendfile(void *ctx, int fd, off_t *offset, size_t len)
{
    static char buf[16384];
    ssize_t got = pread(fd, buf, len < sizeof buf ? len : sizeof buf, *offset);
    if (got <= 0)
        return got;
    ssize_t n = fake_take(ctx, buf, (size_t)got);
    if (n > 0)
        *offset += n;
    return n;
}

/* Flush through the fake until done, appending more at every EAGAIN. */
START_TEST(sink_few_bytes_and_eagain)
{
    enum { TOTAL = 200000 };
    char *want = malloc(TOTAL);
    pattern(want, TOTAL, 21);
    int fd = tmpfile_with(want + 30000, 40000);
    fake_sink f = {.step = 777, .every = 3};
    outq_sink fs = {&f, fake_writev, fake_sendfile};
    outq q;
    outq_init(&q);
    /* memory, a file, borrowed bytes, then small appends while waiting */
    ck_assert_int_eq(outq_append(&q, want, 30000), 0);
    ck_assert_int_eq(outq_append_file(&q, fd, 0, 40000), 0);
    ck_assert_int_eq(outq_append_ext(&q, want + 70000, 30000, NULL, NULL), 0);
    size_t queued = 100000, total = 0;
    int agains = 0;
    for (int round = 0; round < 100000; round++) {
        size_t w = 12345, before = outq_buffered(&q);
        outq_result r = outq_write_sink(&q, &fs, &w);
        ck_assert_uint_eq(outq_buffered(&q), before - w);
        total += w;
        if (r == OUTQ_DONE && queued == TOTAL)
            break;
        if (r == OUTQ_AGAIN)
            agains++;
        else
            ck_assert_int_eq(r, OUTQ_DONE);
        if (queued < TOTAL) {
            size_t k = TOTAL - queued < 333 ? TOTAL - queued : 333;
            ck_assert_int_eq(outq_append(&q, want + queued, k), 0);
            queued += k;
        }
    }
    ck_assert_uint_eq(queued, TOTAL);
    ck_assert_uint_eq(total, TOTAL);
    ck_assert_uint_eq(f.n, TOTAL);
    ck_assert(memcmp(f.out, want, TOTAL) == 0);
    ck_assert_int_gt(agains, 10);
    ck_assert_int_eq(f.retries_checked, agains);
    ck_assert_ptr_null(q.head);
    outq_free(&q);
    free(f.out);
    free(want);
}
END_TEST

START_TEST(sink_eintr_is_retried)
{
    fake_sink f = {.step = 5, .eintr_once = 1};
    outq_sink fs = {&f, fake_writev, fake_sendfile};
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append(&q, "hello world", 11), 0);
    size_t w = 0;
    ck_assert_int_eq(outq_write_sink(&q, &fs, &w), OUTQ_DONE);
    ck_assert_uint_eq(w, 11);
    ck_assert_uint_eq(f.n, 11);
    ck_assert(memcmp(f.out, "hello world", 11) == 0);
    outq_free(&q);
    free(f.out);
}
END_TEST

START_TEST(sink_error_keeps_the_rest)
{
    fake_sink f = {.step = 4, .every = 3, .err = EPIPE};
    outq_sink fs = {&f, fake_writev, fake_sendfile};
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append(&q, "0123456789abcdef", 16), 0);
    size_t w = 0;
    errno = 0;
    ck_assert_int_eq(outq_write_sink(&q, &fs, &w), OUTQ_ERROR);
    ck_assert_int_eq(errno, EPIPE);
    ck_assert_uint_eq(w, 8); /* two calls took 4 bytes each */
    ck_assert_uint_eq(outq_buffered(&q), 8);
    outq_free(&q);
    free(f.out);
}
END_TEST

START_TEST(sink_file_shrank_is_eio)
{
    int fd = tmpfile_with("0123456789", 10);
    fake_sink f = {.step = 3};
    outq_sink fs = {&f, fake_writev, fake_sendfile};
    outq q;
    outq_init(&q);
    ck_assert_int_eq(outq_append_file(&q, fd, 2, 20), 0);
    size_t w = 0;
    errno = 0;
    ck_assert_int_eq(outq_write_sink(&q, &fs, &w), OUTQ_ERROR);
    ck_assert_int_eq(errno, EIO);
    ck_assert_uint_eq(w, 8);
    ck_assert(memcmp(f.out, "23456789", 8) == 0);
    outq_free(&q);
    free(f.out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("outq");
    TCase *t = tcase_create("memory");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, empty_queue);
    tcase_add_test(t, append_across_segment_boundaries);
    tcase_add_test(t, large_appends);
    tcase_add_test(t, reserve_commit);
    suite_add_tcase(s, t);

    t = tcase_create("file");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, file_segment_between_memory);
    tcase_add_test(t, two_files_back_to_back);
    tcase_add_test(t, zero_length_file_closes_fd);
    tcase_add_test(t, free_closes_queued_fds);
    tcase_add_test(t, file_shrank_is_error);
    suite_add_tcase(s, t);

    t = tcase_create("partial");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, partial_writes_full_socket);
    tcase_add_test(t, many_segments_partial);
    tcase_add_test(t, free_after_partial_file_write);
    tcase_add_test(t, closed_peer_is_error);
    tcase_add_test(t, closed_peer_file_is_error);
    suite_add_tcase(s, t);

    t = tcase_create("external");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, ext_mixed_partial_released_once);
    tcase_add_test(t, ext_released_by_free);
    tcase_add_test(t, ext_zero_length_and_appends_after);
    tcase_add_test(t, pagi_buf_shared_by_two_queues);
    suite_add_tcase(s, t);

    t = tcase_create("sink");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, sink_few_bytes_and_eagain);
    tcase_add_test(t, sink_eintr_is_retried);
    tcase_add_test(t, sink_error_keeps_the_rest);
    tcase_add_test(t, sink_file_shrank_is_eio);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

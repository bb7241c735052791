/*
 * perl_pool_link.c - a worker's links to its generation's pool processes
 * (docs/ARCHITECTURE.md, "The worker pool"): one connection kept to each
 * process, a claim of an idle process in the shared region (a CAS on its
 * pool_state), the worker's queue of jobs (PSGI requests, worker_pool
 * calls) that found no idle process, and the frames read back, handed to
 * the job that runs on that link. Knows frames, not what is in them.
 */
#include "perl_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/pool.h"
#include "worker/core/loop.h"

#define READ_CHUNK (256 * 1024)
/* The pool process sends body frames of 256 KiB at most; a frame much
 * larger is not from it. */
#define FRAME_MAX (16 * 1024 * 1024)

typedef struct pool_link {
    int num; /* the pool process's number, 1.. */
    int fd;  /* -1: not connected (made at the next claim) */
    pagi_io *rio, *wio;
    buf in;
    pool_job *job;    /* the job running on this link's process, or NULL */
    pool_job *next;   /* claimed while job's last frames were still coming
                         (the process goes idle just before it writes them):
                         written once they came */
    shm_worker *slot; /* the process's slot, at the last claim */
    long pid;         /* its pid then */
    long peer_pid;    /* the process that took this link (its H frame); 0: not yet */
    int reading;      /* inside on_link_readable: a cut waits for its end */
    int cut;          /* closed while reading: the reader closes it after */
} pool_link;

/* The worker's side of the pool: one per worker process (the Perl host's
 * loop is one per process), made at the first job. */
static struct {
    pagi_loop *loop;
    const pool_info *pool;
    pool_link *links; /* pool->processes of them */
    pool_job *head, *tail;
    unsigned cursor;
    int dispatching;
} side;

static void dispatch_queue(void);
static void link_write(pool_link *l);
static void queue_push(pool_job *j, int front);
static int start_on(pool_link *l, pool_job *j);

static shm_worker *my_slot(void)
{
    return side.pool ? side.pool->self : NULL;
}

static int link_connect(pool_link *l);

/* Closes the link and makes it again at once: its process (or the one that
 * replaces it) takes the new link when it can, and can then tell this
 * worker when it is idle. */
static void link_close(pool_link *l)
{
    if (l->reading) {
        l->cut = 1;
        return;
    }
    if (l->rio)
        pagi_io_stop(l->rio);
    if (l->wio)
        pagi_io_stop(l->wio);
    l->rio = l->wio = NULL;
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    l->cut = 0;
    l->peer_pid = 0;
    buf_free(&l->in);
    (void)link_connect(l); /* else at its next claim */
}

/* The job leaves its link (its end frame came, or the link broke). */
static void detach(pool_link *l)
{
    pool_job *j = l->job;
    l->job = NULL;
    if (j) {
        j->link = NULL;
        if (l->wio) /* a body still being written is not for the next job */
            pagi_io_stop(l->wio);
        l->wio = NULL;
        buf_free(&j->out);
    }
}

/* A job claimed for l but not written yet goes back to the queue's front,
 * and the process's claim is let go when it is alive (release). */
static void requeue_next(pool_link *l, int release)
{
    pool_job *n = l->next;
    if (!n)
        return;
    l->next = NULL;
    n->link = NULL;
    if (release && l->slot)
        atomic_store(&l->slot->pool_state, POOL_IDLE);
    queue_push(n, 1);
}

/* The link broke (EOF, a read or write error, a malformed frame): a job on
 * it lost its process. */
static void link_lost(pool_link *l)
{
    pool_job *j = l->job;
    detach(l);
    requeue_next(l, 0);
    link_close(l);
    if (j)
        j->ops->on_lost(j);
}

static int is_end_frame(char type)
{
    return type == 'E' || type == 'X' || type == 'R' || type == 'F';
}

static void on_link_readable(pagi_io *w, int fd, int events, void *ud)
{
    (void)w;
    (void)events;
    pool_link *l = ud;
    int eof = 0;
    for (int round = 0; round < 4 && !eof; round++) {
        char *p = buf_reserve(&l->in, READ_CHUNK);
        if (!p) {
            eof = 1;
            break;
        }
        ssize_t n = read(fd, p, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            eof = 1;
            break;
        }
        buf_commit(&l->in, (size_t)n);
        if ((size_t)n < READ_CHUNK)
            break;
    }
    l->reading = 1;
    while (!l->cut && buf_size(&l->in) >= 5) {
        const unsigned char *h = (const unsigned char *)buf_head(&l->in);
        uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        if (len > FRAME_MAX) {
            pagi_log(side.loop, 0, "worker pool: a malformed frame from pool process %d", l->num);
            eof = 1;
            break;
        }
        if (buf_size(&l->in) < 5 + (size_t)len)
            break;
        char type = (char)h[0];
        const char *payload = (const char *)h + 5;
        if (type == 'I') {                    /* the process is idle: the queue is tried below */
        } else if (type == 'H' && len == 4) { /* who took the link */
            const unsigned char *q = (const unsigned char *)payload;
            l->peer_pid =
                (long)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]);
        } else if (!l->job) {
            pagi_log(side.loop, 0, "worker pool: a frame '%c' for no request from pool process %d",
                     type, l->num);
            eof = 1;
            break;
        } else if (is_end_frame(type)) {
            pool_job *j = l->job;
            detach(l);
            j->ops->on_frame(j, type, payload, len);
            pool_job *n = l->next;
            l->next = NULL;
            if (n && !l->cut && start_on(l, n) == 0)
                n->ops->on_started(n);
            else if (n)
                queue_push(n, 1);
        } else if (l->job->ops->on_frame(l->job, type, payload, len) < 0) {
            pagi_log(side.loop, 0, "worker pool: an unexpected frame '%c' from pool process %d",
                     type, l->num);
            eof = 1;
            break;
        }
        buf_consume(&l->in, 5 + (size_t)len);
    }
    l->reading = 0;
    if (!l->cut && !eof && l->job && l->job->ops->after_read)
        l->job->ops->after_read(l->job);
    if (l->cut)
        link_close(l);
    else if (eof)
        link_lost(l);
    else if (!buf_size(&l->in) && l->in.cap > READ_CHUNK * 2)
        buf_free(&l->in); /* a large response passed: its memory goes back */
    dispatch_queue();
}

static void on_link_writable(pagi_io *w, int fd, int events, void *ud)
{
    (void)w;
    (void)fd;
    (void)events;
    link_write(ud);
}

/* Writes the job's frames, refilled from its spooled body, up to its end. */
static void link_write(pool_link *l)
{
    pool_job *j = l->job;
    while (j && l->fd >= 0) {
        if (!buf_size(&j->out)) {
            if (j->out_done) {
                if (l->wio)
                    pagi_io_stop(l->wio);
                l->wio = NULL;
                buf_free(&j->out);
                return;
            }
            if (j->ops->refill(j) < 0) {
                link_lost(l);
                return;
            }
        }
        ssize_t n = send(l->fd, buf_head(&j->out), buf_size(&j->out), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!l->wio)
                l->wio = pagi_io_watch(side.loop, l->fd, PAGI_IO_WRITE, on_link_writable, l);
            return;
        }
        if (n <= 0) { /* the process is gone: the read side sees it */
            if (l->wio)
                pagi_io_stop(l->wio);
            l->wio = NULL;
            return;
        }
        buf_consume(&j->out, (size_t)n);
        j->sent = 1;
    }
}

static int link_connect(pool_link *l)
{
    struct sockaddr_un addr;
    socklen_t len = sizeof addr;
    if (getsockname(side.pool->fds[l->num - 1], (struct sockaddr *)&addr, &len) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&addr, len) < 0) {
        close(fd);
        return -1;
    }
    l->fd = fd;
    l->rio = pagi_io_watch(side.loop, fd, PAGI_IO_READ, on_link_readable, l);
    if (!l->rio) {
        close(fd);
        l->fd = -1;
        return -1;
    }
    return 0;
}

/* Links to every process, so that each can tell this worker it is idle. */
static int side_init(pagi_loop *loop)
{
    if (side.links)
        return 0;
    const pool_info *pool = loop->pool;
    side.links = calloc((size_t)pool->processes, sizeof *side.links);
    if (!side.links)
        return -1;
    side.loop = loop;
    side.pool = pool;
    for (int i = 0; i < pool->processes; i++) {
        side.links[i] = (pool_link){.num = i + 1, .fd = -1};
        (void)link_connect(&side.links[i]); /* else at its first claim */
    }
    return 0;
}

static void queue_push(pool_job *j, int front)
{
    j->next = NULL;
    if (front) {
        j->next = side.head;
        side.head = j;
        if (!side.tail)
            side.tail = j;
    } else {
        if (side.tail)
            side.tail->next = j;
        else
            side.head = j;
        side.tail = j;
    }
    j->queued = 1;
    if (my_slot()) /* before the claim that follows (see pool_job_submit) */
        atomic_fetch_add(&my_slot()->pool_waiting, 1);
}

static void queue_remove(pool_job *j)
{
    pool_job **pp = &side.head, *prev = NULL;
    while (*pp && *pp != j) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp)
        *pp = j->next;
    if (side.tail == j)
        side.tail = prev;
    j->next = NULL;
    j->queued = 0;
    if (my_slot())
        atomic_fetch_add(&my_slot()->pool_waiting, -1);
}

/* One claim: 1 with *out the claimed process's link, connected; 0 when
 * none is idle or the one claimed cannot be reached (it is let go); -1 when
 * the one claimed has not taken its link yet (let go: try another). */
static int claim_one(pool_link **out)
{
    const pool_info *pool = side.pool;
    int num = 0;
    shm_worker *slot = NULL;
    if (pool->shm)
        num = pool_claim(pool->shm, pool->generation, &side.cursor, &slot);
    else /* no shared region (never under a master): any link without a job */
        for (int i = 0; i < pool->processes && !num; i++) {
            int k = (int)((side.cursor + (unsigned)i) % (unsigned)pool->processes);
            if (!side.links[k].job)
                num = k + 1;
        }
    if (num <= 0 || num > pool->processes)
        return 0;
    pool_link *l = &side.links[num - 1];
    long pid = slot ? atomic_load(&slot->pid) : 0;
    if (slot && l->peer_pid && l->peer_pid != pid) {
        /* The link was taken by the process this one replaced (leaving
         * after a harakiri or max_requests). Let the claim go; the idle link
         * is made again, and the new process's H and I come on it. A link
         * nobody has taken yet (no H) is used: only a live process of the
         * slot accepts it, and the request waits in the socket till then. */
        atomic_store(&slot->pool_state, POOL_IDLE);
        if (!l->job && !l->next && !l->reading)
            link_close(l);
        return -1;
    }
    l->slot = slot;
    l->pid = pid;
    if (l->next || (l->fd < 0 && link_connect(l) < 0)) {
        if (slot)
            atomic_store(&slot->pool_state, POOL_IDLE);
        return 0;
    }
    *out = l;
    return 1;
}

/* An idle process claimed: its link, connected (NULL: none is idle, or
 * the one claimed cannot be reached: it is let go). */
static pool_link *claim_link(void)
{
    pool_link *l = NULL;
    for (int tries = 0; tries <= side.pool->processes; tries++) {
        int got = claim_one(&l);
        if (got >= 0)
            return got ? l : NULL;
    }
    return NULL;
}

/* The job goes to the claimed link l: 0, or -1 when the link turned out
 * dead before a byte went (a process replaced since the link was made). */
static int start_on(pool_link *l, pool_job *j)
{
    j->link = l;
    j->num = l->num;
    j->pid = l->pid;
    if (l->job) { /* its last frames are still coming */
        l->next = j;
        return 0;
    }
    l->job = j;
    j->sent = 0;
    link_write(l);
    if (l->job == j && !j->sent && !l->wio) { /* its frames are kept for another */
        l->job = NULL;
        j->link = NULL;
        link_close(l);
        return -1;
    }
    return 0;
}

static void dispatch_queue(void)
{
    if (side.dispatching)
        return;
    side.dispatching = 1;
    while (side.head) {
        pool_link *l = claim_link();
        if (!l)
            break;
        pool_job *j = side.head;
        queue_remove(j);
        if (start_on(l, j) < 0) {
            queue_push(j, 1);
            continue;
        }
        if (l->job == j)
            j->ops->on_started(j);
    }
    side.dispatching = 0;
}

int pool_job_submit(pagi_loop *loop, pool_job *j)
{
    if (side_init(loop) < 0)
        return -1;
    j->link = NULL;
    j->queued = 0;
    if (!side.head) {
        pool_link *l;
        while ((l = claim_link())) {
            if (start_on(l, j) == 0) {
                if (l->job == j)
                    j->ops->on_started(j);
                return 1;
            }
        }
    }
    const pool_info *pool = side.pool;
    if (pool->shm && pool_queued(pool->shm, pool->generation) >= pool->queue_limit)
        return -1;
    /* Counted as waiting before the claim below: a process that goes idle
     * after that claim failed sees this worker waiting and tells it ('I'). */
    queue_push(j, 0);
    dispatch_queue();
    return 0;
}

void pool_job_cancel(pool_job *j)
{
    if (j->queued) {
        queue_remove(j);
        return;
    }
    pool_link *l = j->link;
    if (!l)
        return;
    if (l->next == j) { /* not written yet: the claim is let go */
        l->next = NULL;
        j->link = NULL;
        if (l->slot)
            atomic_store(&l->slot->pool_state, POOL_IDLE);
        return;
    }
    requeue_next(l, 1);
    /* The process is still at work on it: its next write to the link fails
     * and ends the job there; the link is made again at its next claim. */
    detach(l);
    link_close(l);
}

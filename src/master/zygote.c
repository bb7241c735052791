/*
 * zygote.c - the zygote process and the master's end of its channel.
 *
 * The zygote is forked from the master, so it starts with everything a
 * worker gets by being forked from the master: the config, this
 * generation's listening sockets, the shared region, the error log. It
 * passes all of that on by forking; the only per-worker fact that must
 * travel is the worker number, which comes in the request. Each worker is
 * forked twice (zygote -> middle -> worker): the middle reports the
 * worker's pid to the master and exits, so the worker is reparented to the
 * master (a child subreaper), which reaps and signals it like any worker.
 * A report is written before the middle exits, so it is always readable by
 * the time the master can reap the worker.
 */
#include "zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exitcodes.h"
#include "common/log.h"
#include "common/log_handover.h"
#include "gen_logs.h"
#include "common/proctitle.h"
#include "worker/preload.h"
#include "fd_audit.h"
#include "generation.h"
#include "privileges.h"

/* How long a new worker waits to be reparented to the master. */
#define REPARENT_WAIT_MS 5000

static volatile sig_atomic_t zy_reopen;
static int zy_log_chan = -1; /* the zygote's own log channel: not its workers' */

static void zy_on_usr1(int signo)
{
    (void)signo;
    zy_reopen = 1;
}

/* SIGTERM (its generation drains) and SIGQUIT (fast stop): nothing to
 * finish, and SIGQUIT's default would dump a core of the whole app. */
static void zy_on_stop(int signo)
{
    (void)signo;
    _exit(EXIT_OK);
}

void zygote_init(zygote *z)
{
    *z = (zygote){.fd = -1, .log_chan = -1};
}

static void send_report(int fd, const zygote_msg *m)
{
    unsigned char b[ZMSG_SIZE];
    size_t n = zmsg_encode(m, b);
    if (n && send(fd, b, n, MSG_NOSIGNAL) == (ssize_t)n)
        return;
    log_error("cannot report worker %d to the master: %s", m->num, strerror(errno));
    /* A worker nobody knows of would never be supervised. */
    if (m->type == ZMSG_SPAWNED)
        kill(m->pid, SIGKILL);
}

/* The new worker: once the middle process is gone, the master is its parent. */
static void __attribute__((noreturn))
worker_child(const gen_env *e, generation *g, int num, int pubsub_fd, int log_chan)
{
    char role[32];
    gen_slot_label(&(worker_slot){.num = num}, role, sizeof role);
    gen_child_prepare(e, g, role);
    if (zy_log_chan >= 0)
        close(zy_log_chan);
    struct timespec ms = {0, 1000000};
    for (int i = 0; getppid() != e->master_pid && i < REPARENT_WAIT_MS; i++)
        nanosleep(&ms, NULL);
    gen_child_attach(e); /* exits when the master is not (or no longer) the parent */
    gen_child_work(e, g, num, pubsub_fd, log_chan);
}

static void spawn(const gen_env *e, generation *g, int fd, const zygote_msg *req, int pubsub_fd,
                  int log_chan)
{
    /* Output the app buffered at load time is written once, not per worker. */
    worker_preload_before_fork();
    fflush(NULL);
    pid_t mid = fork();
    if (mid == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            close(fd);
            worker_child(e, g, req->num, pubsub_fd, log_chan);
        }
        zygote_msg m = {.seq = req->seq, .num = req->num};
        if (pid > 0) {
            m.type = ZMSG_SPAWNED;
            m.pid = (int)pid;
        } else {
            m.type = ZMSG_FAILED;
            m.err = errno ? errno : EAGAIN;
        }
        send_report(fd, &m);
        _exit(0);
    }
    if (mid < 0) {
        zygote_msg m = {.type = ZMSG_FAILED, .seq = req->seq, .num = req->num, .err = errno};
        send_report(fd, &m);
        return;
    }
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* A request and the channels that come with it (SCM_RIGHTS, close-on-exec):
 * the log channel first, then the pub/sub one if any; any other descriptor
 * is closed. */
static ssize_t recv_request(int fd, unsigned char *b, size_t len, int *log_chan, int *pubsub_fd)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = b, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.space,
                        .msg_controllen = sizeof ctl.space};
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (*log_chan < 0)
                *log_chan = got;
            else if (*pubsub_fd < 0)
                *pubsub_fd = got;
            else
                close(got);
        }
    }
    return n;
}

/* Ours again after loading: app code may have taken them over (Perl's
 * %SIG), and its handlers would never run while the zygote waits in C. */
static void install_handlers(void)
{
    struct sigaction sa = {.sa_handler = zy_on_usr1}; /* no SA_RESTART: recv returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = zy_on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
}

/* SIGUSR1: the master sent the reopened files on our log channel first. */
static void zy_take_logs(int log_chan)
{
    int efd, afd;
    int got = log_chan >= 0 ? log_handover_recv(log_chan, &efd, &afd, 0) : 0;
    if (got <= 0) {
        log_error("SIGUSR1: no reopened log files came from the master");
        return;
    }
    log_adopt_fd(efd);
    if (afd >= 0)
        close(afd); /* the zygote writes no access log */
}

static void __attribute__((noreturn))
zygote_main(const gen_env *e, generation *g, int fd, int log_chan)
{
    zy_log_chan = log_chan;
    /* Titled first: until then it looks like the master. */
    proctitle_zygote(g->id);
    gen_child_prepare(e, g, "zygote");
    /* Application code never runs as root, here as in a worker. */
    if (priv_drop_for(g->cfg) < 0)
        _exit(EXIT_WORKER_FATAL);
    gen_child_attach(e);
    install_handlers();
    /* A log reopen during the load waits for its end: its handler would
     * interrupt the app's load-time system calls (no SA_RESTART). */
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);

    char err[1024];
    fd_audit before;
    fd_audit_snapshot(&before);
    int loaded = worker_preload(g->cfg, err, sizeof err);
    if (loaded == 0)
        /* a DBI handle, a socket: shared by every worker */
        fd_audit_report(&before, fd_audit_advice(g->cfg));
    install_handlers();
    sigprocmask(SIG_UNBLOCK, &usr1, NULL); /* a reopen asked meanwhile happens now */
    if (loaded == -2) {
        /* The app works, only not forked from here: the master lets the
         * workers load it themselves. */
        log_warn("cannot preload: %s (a timer or watcher started at load time needs the "
                 "worker's loop; start it in lifespan startup to share the compiled code); "
                 "generation %u loads the apps in each worker",
                 err, g->id);
        _exit(EXIT_NO_PRELOAD);
    }
    if (loaded < 0) {
        log_error("%s", err);
        log_error("the apps could not be loaded; no worker of generation %u can start", g->id);
        _exit(EXIT_WORKER_FATAL);
    }
    log_info("apps loaded (generation %u): forking workers on request", g->id);
    for (;;) {
        if (zy_reopen) {
            zy_reopen = 0;
            zy_take_logs(log_chan);
        }
        unsigned char b[ZMSG_SIZE + 1];
        int pubsub_fd = -1, log_fd = -1;
        ssize_t n = recv_request(fd, b, sizeof b, &log_fd, &pubsub_fd);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the master closed the channel: this generation is over */
        zygote_msg m;
        if (zmsg_decode(b, (size_t)n, &m) < 0 || m.type != ZMSG_SPAWN) {
            log_error("ignoring a malformed request from the master (%zd bytes)", n);
            if (pubsub_fd >= 0)
                close(pubsub_fd);
            if (log_fd >= 0)
                close(log_fd);
            continue;
        }
        spawn(e, g, fd, &m, pubsub_fd, log_fd);
        if (pubsub_fd >= 0)
            close(pubsub_fd); /* the worker has it now (or failed to start) */
        if (log_fd >= 0)
            close(log_fd);
    }
    log_info("zygote of generation %u exiting", g->id);
    _exit(EXIT_OK);
}

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int zygote_start(const gen_env *e, generation *g)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        log_error("cannot create the zygote's channel: %s", strerror(errno));
        return -1;
    }
    /* Its own log channel: its error log after a reopen (gen_logs.h). */
    int log_master, log_chan = gen_logs_channel(g, &log_master);
    if (log_chan < 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        zygote_main(e, g, sv[1], log_chan);
    }
    close(sv[1]);
    close(log_chan);
    if (pid < 0) {
        log_error("cannot fork the zygote of generation %u: %s", g->id, strerror(errno));
        close(sv[0]);
        close(log_master);
        return -1;
    }
    if (g->zy.log_chan >= 0)
        close(g->zy.log_chan);
    g->zy.log_chan = log_master;
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    g->zy.pid = pid;
    g->zy.hung = 0;
    g->zy.fd = sv[0];
    g->zy.started = now_mono();
    log_info("zygote started (pid %d, generation %u): loading the apps once for every worker",
             (int)pid, g->id);
    return 0;
}

uint32_t zygote_request(zygote *z, int num, int log_fd, int pubsub_fd)
{
    if (z->fd < 0)
        return 0;
    if (++z->next_seq == 0)
        z->next_seq = 1;
    zygote_msg m = {.type = ZMSG_SPAWN, .seq = z->next_seq, .num = num};
    unsigned char b[ZMSG_SIZE];
    size_t n = zmsg_encode(&m, b);
    struct iovec iov = {.iov_base = b, .iov_len = n};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    /* The worker's channels, handed on by the zygote at the fork. */
    int pass[2] = {log_fd, pubsub_fd};
    size_t npass = pubsub_fd >= 0 ? 2 : 1;
    memset(&ctl, 0, sizeof ctl);
    mh.msg_control = ctl.space;
    mh.msg_controllen = CMSG_SPACE(npass * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(npass * sizeof(int));
    memcpy(CMSG_DATA(c), pass, npass * sizeof(int));
    if (!n || sendmsg(z->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n) {
        log_error("cannot ask the zygote (pid %d) for worker %d: %s", (int)z->pid, num,
                  n ? strerror(errno) : "bad worker number");
        return 0;
    }
    return m.seq;
}

int zygote_read(zygote *z, zygote_msg *m)
{
    for (;;) {
        if (z->fd < 0)
            return -1;
        unsigned char b[ZMSG_SIZE + 1];
        ssize_t n = recv(z->fd, b, sizeof b, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        if (zmsg_decode(b, (size_t)n, m) == 0 && m->type != ZMSG_SPAWN)
            return 1;
        log_error("ignoring a malformed report from the zygote (pid %d, %zd bytes)", (int)z->pid,
                  n);
    }
}

void zygote_shutdown(zygote *z)
{
    if (z->fd >= 0)
        shutdown(z->fd, SHUT_RDWR);
}

void zygote_close(zygote *z)
{
    if (z->fd >= 0)
        close(z->fd);
    z->fd = -1;
    if (z->log_chan >= 0)
        close(z->log_chan);
    z->log_chan = -1;
}

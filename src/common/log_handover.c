/*
 * log_handover.c - the wire form of a log handover (log_handover.h): one
 * datagram whose single byte says which descriptors follow (bit 0: the
 * error log, bit 1: the access log), the descriptors in that order.
 */
#include "log_handover.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HAS_ERROR 1u
#define HAS_ACCESS 2u

int log_handover_send(int chan, int error_fd, int access_fd)
{
    int fds[2];
    size_t n = 0;
    unsigned char what = 0;
    if (error_fd >= 0) {
        fds[n++] = error_fd;
        what |= HAS_ERROR;
    }
    if (access_fd >= 0) {
        fds[n++] = access_fd;
        what |= HAS_ACCESS;
    }
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof fds)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = &what, .iov_len = 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n) {
        mh.msg_control = ctl.space;
        mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(n * sizeof(int));
        memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    }
    ssize_t r;
    do
        r = sendmsg(chan, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r == 1 ? 0 : -1;
}

int log_handover_recv(int chan, int *error_fd, int *access_fd, int wait)
{
    *error_fd = *access_fd = -1;
    unsigned char what = 0;
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = &what, .iov_len = 1};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.space,
                        .msg_controllen = sizeof ctl.space};
    ssize_t r;
    do
        r = recvmsg(chan, &mh, MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT));
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    if (r == 0) {
        errno = ECONNRESET; /* a handover is never empty: the master's end is closed */
        return -1;
    }
    int got[4];
    size_t n = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (n < 4)
                got[n++] = fd;
            else
                close(fd);
        }
    }
    /* Exactly the descriptors the byte announces, or none is trusted. */
    size_t want = !!(what & HAS_ERROR) + !!(what & HAS_ACCESS);
    if (n != want || (mh.msg_flags & MSG_CTRUNC)) {
        for (size_t i = 0; i < n; i++)
            close(got[i]);
        errno = EPROTO;
        return -1;
    }
    size_t i = 0;
    if (what & HAS_ERROR)
        *error_fd = got[i++];
    if (what & HAS_ACCESS)
        *access_fd = got[i++];
    return 1;
}

/*
 * static_path.c - containment for the static app: lexical normalisation of
 * the decoded path, then an open that cannot leave the root, by openat2
 * (RESOLVE_BENEATH) where the kernel has it and by a component-by-component
 * O_NOFOLLOW walk that checks every symlink target where it does not. Both
 * follow relative links that stay inside and refuse absolute ones. What was
 * opened is then checked for hidden names by its real path, so a link to a
 * dotfile is not served either.
 */
#include "static_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __has_include
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif
#endif

#ifndef RESOLVE_BENEATH
/* Older headers: the ABI is fixed since Linux 5.6. */
struct open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_BENEATH 0x08
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* O_NONBLOCK: opening a FIFO someone dropped into the tree must not block the worker. */
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
#define WALK_MAX_LINKS 40 /* like the kernel's MAXSYMLINKS */
#define WALK_MAX_DEPTH 256

static_path_rc static_path_normalize(const char *path, size_t len, char out[STATIC_PATH_MAX],
                                     int *dir_form)
{
    size_t o = 0, i = 0;
    int last_was_dir = 1; /* "" is the root: a directory form */
    if (memchr(path, '\0', len))
        return STATIC_PATH_BAD;
    while (i < len) {
        while (i < len && path[i] == '/')
            i++;
        size_t start = i;
        while (i < len && path[i] != '/')
            i++;
        size_t n = i - start;
        const char *seg = path + start;
        last_was_dir = i < len; /* a slash follows */
        if (n == 0 || (n == 1 && seg[0] == '.')) {
            last_was_dir = 1;
            continue;
        }
        if (n == 2 && seg[0] == '.' && seg[1] == '.') {
            if (o == 0)
                return STATIC_PATH_BAD; /* above the root */
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* the separator */
            last_was_dir = 1;
            continue;
        }
        if (o + (o ? 1 : 0) + n >= STATIC_PATH_MAX)
            return STATIC_PATH_TOOLONG;
        if (o)
            out[o++] = '/';
        memcpy(out + o, seg, n);
        o += n;
    }
    out[o] = '\0';
    /* Hidden names are judged on what is left: "/.x/../y" is "/y". */
    for (size_t k = 0; k < o; k++)
        if (out[k] == '.' && (k == 0 || out[k - 1] == '/'))
            return STATIC_PATH_HIDDEN;
    *dir_form = last_was_dir;
    return STATIC_PATH_OK;
}

/* ---- openat2 ---- */

static int sys_openat2(int dirfd, const char *path, uint64_t resolve)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = OPEN_FLAGS;
    how.resolve = resolve;
    long fd;
    do
        fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    while (fd < 0 && errno == EAGAIN); /* RESOLVE_BENEATH retries on a concurrent rename */
    return fd < 0 ? -errno : (int)fd;
}

int static_have_openat2(void)
{
    int fd = sys_openat2(AT_FDCWD, "/", RESOLVE_BENEATH);
    /* "/" is absolute, hence not beneath the cwd: EXDEV means the kernel understood. */
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return fd == -EXDEV;
}

/* ---- the walk: for kernels without openat2 (or where seccomp hides it) ---- */

typedef struct walk {
    const static_root *r;
    int fds[WALK_MAX_DEPTH]; /* fds[0] is the root (not ours), then one per directory */
    int depth;
    int links;
} walk;

static void walk_pop_all(walk *w)
{
    while (w->depth > 0)
        close(w->fds[w->depth--]);
}

/*
 * Prepend a relative target to the unresolved rest: todo becomes
 * "target/rest". An absolute target is refused, whatever it names: that is
 * what RESOLVE_BENEATH does, and both ways must agree.
 */
static int walk_take_link(walk *w, const char *target, char *todo, size_t *todo_len)
{
    if (++w->links > WALK_MAX_LINKS)
        return -ELOOP;
    if (target[0] == '/')
        return -EXDEV;
    size_t tl = strlen(target);
    if (tl + 1 + *todo_len >= STATIC_PATH_MAX * 2)
        return -ENAMETOOLONG;
    memmove(todo + tl + 1, todo, *todo_len + 1);
    memcpy(todo, target, tl);
    todo[tl] = '/';
    *todo_len += tl + 1;
    return 0;
}

static int walk_open(const static_root *r, const char *rel)
{
    walk w = {.r = r, .depth = 0, .links = 0};
    w.fds[0] = r->fd;
    char todo[STATIC_PATH_MAX * 2];
    size_t todo_len = strlen(rel);
    if (todo_len >= sizeof todo)
        return -ENAMETOOLONG;
    memcpy(todo, rel, todo_len + 1);
    int rc;
    for (;;) {
        /* Next component of todo. */
        size_t i = 0;
        while (i < todo_len && todo[i] == '/')
            i++;
        size_t start = i;
        while (i < todo_len && todo[i] != '/')
            i++;
        size_t n = i - start;
        int last = 1;
        for (size_t k = i; k < todo_len; k++)
            if (todo[k] != '/') {
                last = 0;
                break;
            }
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            rc = -ENAMETOOLONG;
            break;
        }
        memcpy(comp, todo + start, n);
        comp[n] = '\0';
        memmove(todo, todo + i, todo_len - i + 1);
        todo_len -= i;
        int cur = w.fds[w.depth];
        if (n == 0 || (n == 1 && comp[0] == '.')) {
            if (last) {
                rc = openat(cur, ".", OPEN_FLAGS);
                rc = rc < 0 ? -errno : rc;
                break;
            }
            continue;
        }
        if (n == 2 && comp[0] == '.' && comp[1] == '.') {
            if (w.depth == 0) {
                rc = -EXDEV; /* a link's ".." climbing above the root */
                break;
            }
            close(w.fds[w.depth--]);
            if (last) {
                rc = openat(w.fds[w.depth], ".", OPEN_FLAGS);
                rc = rc < 0 ? -errno : rc;
                break;
            }
            continue;
        }
        int fd =
            openat(cur, comp,
                   last ? OPEN_FLAGS | O_NOFOLLOW : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            if (last) {
                rc = fd;
                break;
            }
            if (w.depth + 1 >= WALK_MAX_DEPTH) {
                close(fd);
                rc = -ENAMETOOLONG;
                break;
            }
            w.fds[++w.depth] = fd;
            continue;
        }
        /* O_NOFOLLOW on a symlink: ELOOP; O_DIRECTORY on one: ENOTDIR. Look. */
        int e = errno;
        char target[STATIC_PATH_MAX];
        ssize_t tl =
            (e == ELOOP || e == ENOTDIR) ? readlinkat(cur, comp, target, sizeof target - 1) : -1;
        if (tl < 0) {
            rc = -e;
            break;
        }
        if (tl == 0 || (size_t)tl >= sizeof target - 1) {
            rc = -ENAMETOOLONG;
            break;
        }
        target[tl] = '\0';
        rc = walk_take_link(&w, target, todo, &todo_len);
        if (rc < 0)
            break;
    }
    walk_pop_all(&w);
    return rc;
}

/* ---- public ---- */

/* ---- what was opened ---- */

/* The path the kernel has for fd, NUL-terminated; its length or -1. */
static ssize_t fd_path(int fd, char out[PATH_MAX])
{
    char link[40];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, PATH_MAX - 1);
    if (n < 0 || n >= PATH_MAX - 1)
        return -1;
    out[n] = '\0';
    return n;
}

/*
 * Is what fd is hidden? The request path was checked already; a symlink may
 * still have led to ".env" or into ".git". So the kernel's path of the open
 * file is checked, below the deepest directory it shares with the root (all
 * of it inside the root, the part outside it for follow_symlinks): checking
 * the fd after the open leaves no window for a rename between check and use.
 * 1 hidden, 0 not, -1 cannot tell.
 */
static int opened_hidden(const static_root *r, int fd)
{
    char path[PATH_MAX];
    ssize_t n = fd_path(fd, path);
    if (n < 0)
        return -1;
    size_t len = (size_t)n, i = 0, base = 0;
    while (i < len && i < r->real_len && path[i] == r->real[i]) {
        if (path[i] == '/')
            base = i;
        i++;
    }
    if (i == r->real_len && (i == len || path[i] == '/'))
        base = i; /* the root itself, or below it */
    for (size_t k = base; k + 1 < len; k++)
        if (path[k] == '/' && path[k + 1] == '.')
            return 1;
    return 0;
}

int static_open(const static_root *r, const char *rel)
{
    const char *p = *rel ? rel : ".";
    int fd;
    if (r->follow_symlinks) {
        /* The path is normalised (no ".."), so only an explicit symlink can lead out. */
        fd = openat(r->fd, p, OPEN_FLAGS);
        if (fd < 0)
            return -errno;
    } else if (r->mode == STATIC_RESOLVE_OPENAT2) {
        fd = sys_openat2(r->fd, p, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    } else {
        fd = walk_open(r, rel);
    }
    if (fd < 0)
        return fd;
    int hidden = opened_hidden(r, fd);
    if (hidden != 0) {
        close(fd);
        return hidden > 0 ? -ENOENT : -EACCES;
    }
    return fd;
}

int static_root_open(static_root *r, const char *dir, int follow_symlinks, static_resolve mode,
                     const char **err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->follow_symlinks = follow_symlinks;
    if (mode == STATIC_RESOLVE_AUTO)
        mode = static_have_openat2() ? STATIC_RESOLVE_OPENAT2 : STATIC_RESOLVE_WALK;
    r->mode = mode;
    r->fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (r->fd < 0) {
        *err = "cannot open the static directory";
        return -1;
    }
    char real[PATH_MAX];
    ssize_t n = fd_path(r->fd, real);
    if (n < 0 || !(r->real = strdup(real))) {
        *err = "cannot read the static directory's path from /proc/self/fd (is /proc mounted?)";
        static_root_close(r);
        return -1;
    }
    r->real_len = (size_t)n;
    return 0;
}

void static_root_close(static_root *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    free(r->real);
    r->real = NULL;
}

/*
 * static_path.h - the static app's containment layer: turning a decoded URL
 * path into a path relative to the served directory (lexically normalised,
 * never above it), and opening it so that no symlink leads outside.
 */
#ifndef PAGID_STATIC_PATH_H
#define PAGID_STATIC_PATH_H

#include <stddef.h>

/* Longest relative path we try to open; anything longer cannot exist. */
#define STATIC_PATH_MAX 4096

typedef enum static_path_rc {
    STATIC_PATH_OK = 0,
    STATIC_PATH_BAD,     /* NUL byte, or ".." climbing above the root: 400 */
    STATIC_PATH_HIDDEN,  /* a segment starts with '.': 404 */
    STATIC_PATH_TOOLONG, /* cannot exist: 404 */
} static_path_rc;

/**
 * Normalise the decoded path (RFC 3986 remove_dot_segments, plus empty
 * segments dropped) into out as a relative path without leading or trailing
 * slash ("" is the root). *dir_form is set when the path ends with '/'.
 * Backslashes are ordinary bytes.
 */
static_path_rc static_path_normalize(const char *path, size_t len, char out[STATIC_PATH_MAX],
                                     int *dir_form);

/** How static_open resolves paths. */
typedef enum static_resolve {
    STATIC_RESOLVE_AUTO = 0, /* openat2 if the kernel has it, else the walk */
    STATIC_RESOLVE_OPENAT2,  /* openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) */
    STATIC_RESOLVE_WALK,     /* component by component, O_NOFOLLOW */
} static_resolve;

typedef struct static_root {
    int fd;              /* O_PATH directory fd of the root */
    int follow_symlinks; /* 1: symlinks may lead anywhere */
    static_resolve mode; /* never AUTO once opened */
    char *real;          /* the root's real path (from /proc/self/fd), owned */
    size_t real_len;
} static_root;

/** Open the root directory; 0, or -1 with *err (static string). */
int static_root_open(static_root *r, const char *dir, int follow_symlinks, static_resolve mode,
                     const char **err);
void static_root_close(static_root *r);

/**
 * Open rel (a normalised relative path, "" = the root) read-only, without
 * following any symlink out of the root (unless follow_symlinks): relative
 * links that stay inside are followed, absolute links and links climbing out
 * are refused. What was opened is refused as hidden (-ENOENT) when its real
 * path has a name starting with '.' below what it shares with the root's: a
 * link to ".env" or into ".git" is no way around the rule on request paths.
 * Returns an fd (O_CLOEXEC) or -errno (-EXDEV when a link leads out, -ELOOP
 * for too many links, -EACCES when the real path cannot be read).
 */
int static_open(const static_root *r, const char *rel);

/** Does the running kernel support openat2 with RESOLVE_BENEATH? */
int static_have_openat2(void);

#endif

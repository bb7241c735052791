/*
 * path.c - see path.h: the directory of a path and whether a file could be
 * created in it, shared by pagid -t's checks, the pid file and the logs.
 */
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void path_dir_of(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, len, ".");
    else if (slash == path)
        snprintf(out, len, "/");
    else
        snprintf(out, len, "%.*s", (int)(slash - path), path);
}

int path_creatable(const char *path, char *why, size_t len)
{
    char dir[4096];
    struct stat st;
    path_dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) < 0) {
        snprintf(why, len, "directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, len, "%s is not a directory", dir);
        return -1;
    }
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) < 0) {
        snprintf(why, len, "cannot create files in %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

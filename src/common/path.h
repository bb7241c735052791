/*
 * path.h - small questions about file system paths that the master asks
 * before it writes anything as root: which directory a file goes in, and
 * whether this process could create a file there.
 */
#ifndef PAGID_PATH_H
#define PAGID_PATH_H

#include <stddef.h>

/** The directory part of path into out: "." when there is none, "/" for "/x". */
void path_dir_of(const char *path, char *out, size_t len);

/**
 * Could this process create a file at path (its directory exists, is a
 * directory, and is writable and searchable for us)? 0, or -1 with why set.
 */
int path_creatable(const char *path, char *why, size_t len);

#endif

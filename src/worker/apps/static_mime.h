/*
 * static_mime.h - file extension -> Content-Type for the static app: the
 * system's mime.types (Debian's media-types), read once per instance, with a
 * built-in table of the common types behind it. Types under text/ carry
 * "; charset=utf-8".
 */
#ifndef PAGID_STATIC_MIME_H
#define PAGID_STATIC_MIME_H

#include <stddef.h>

#define STATIC_MIME_DEFAULT "application/octet-stream"
#define STATIC_MIME_SYSTEM_FILE "/etc/mime.types"

typedef struct static_mime static_mime;

/**
 * Load path (NULL: no file, built-ins only). A missing or unreadable file is
 * not an error: the built-in table answers alone. NULL only when out of memory.
 */
static_mime *static_mime_load(const char *path);
void static_mime_free(static_mime *m);

/** The Content-Type for a file name (only its last extension counts, any case). */
const char *static_mime_lookup(const static_mime *m, const char *name, size_t len);

/** How many extensions came from the file (for logs and tests). */
size_t static_mime_file_count(const static_mime *m);

#endif

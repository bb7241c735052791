/*
 * static_mime.c - the extension table of the static app: mime.types parsed
 * once into one string arena and an open-addressing hash (no allocation per
 * lookup), and a built-in table for when the file is absent or silent.
 */
#include "static_mime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXT_MAX 32 /* longer "extensions" are not worth a lookup */
#define CHARSET "; charset=utf-8"

typedef struct mime_slot {
    uint32_t ext;  /* arena offset + 1; 0 = empty slot */
    uint32_t type; /* arena offset of the full Content-Type */
} mime_slot;

struct static_mime {
    char *arena;
    size_t arena_len, arena_cap;
    mime_slot *slots;
    size_t n_slots, n_used; /* n_slots is a power of two */
};

/* Used when mime.types is missing, or has no word on an extension. */
static const struct {
    const char *ext, *type;
} builtin_types[] = {
    {"html", "text/html" CHARSET},
    {"htm", "text/html" CHARSET},
    {"css", "text/css" CHARSET},
    {"js", "text/javascript" CHARSET},
    {"mjs", "text/javascript" CHARSET},
    {"txt", "text/plain" CHARSET},
    {"md", "text/markdown" CHARSET},
    {"csv", "text/csv" CHARSET},
    {"xml", "text/xml" CHARSET},
    {"json", "application/json"},
    {"map", "application/json"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"ico", "image/vnd.microsoft.icon"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"otf", "font/otf"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"ogg", "audio/ogg"},
    {"wav", "audio/wav"},
};

static uint32_t hash_ext(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static long arena_add(static_mime *m, const char *s, size_t n, const char *suffix)
{
    size_t sl = suffix ? strlen(suffix) : 0, need = n + sl + 1;
    if (m->arena_len + need > UINT32_MAX - 1)
        return -1;
    if (m->arena_cap - m->arena_len < need) {
        size_t ncap = m->arena_cap ? m->arena_cap * 2 : 16384;
        while (ncap - m->arena_len < need)
            ncap *= 2;
        char *a = realloc(m->arena, ncap);
        if (!a)
            return -1;
        m->arena = a;
        m->arena_cap = ncap;
    }
    long off = (long)m->arena_len;
    memcpy(m->arena + off, s, n);
    if (sl)
        memcpy(m->arena + off + n, suffix, sl);
    m->arena[off + n + sl] = '\0';
    m->arena_len += need;
    return off;
}

static mime_slot *find_slot(const static_mime *m, const char *ext, size_t n)
{
    if (!m->n_slots)
        return NULL;
    size_t mask = m->n_slots - 1;
    for (size_t i = hash_ext(ext, n) & mask;; i = (i + 1) & mask) {
        mime_slot *sl = &m->slots[i];
        if (!sl->ext)
            return sl;
        const char *e = m->arena + sl->ext - 1;
        if (strlen(e) == n && memcmp(e, ext, n) == 0)
            return sl;
    }
}

static int grow(static_mime *m)
{
    size_t n = m->n_slots ? m->n_slots * 2 : 1024;
    mime_slot *old = m->slots;
    size_t old_n = m->n_slots;
    m->slots = calloc(n, sizeof *m->slots);
    if (!m->slots) {
        m->slots = old;
        return -1;
    }
    m->n_slots = n;
    for (size_t i = 0; i < old_n; i++) {
        if (!old[i].ext)
            continue;
        const char *e = m->arena + old[i].ext - 1;
        *find_slot(m, e, strlen(e)) = old[i];
    }
    free(old);
    return 0;
}

/* First mapping of an extension wins. */
static int add_ext(static_mime *m, const char *ext, size_t n, uint32_t type)
{
    char low[EXT_MAX];
    if (n == 0 || n >= EXT_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        low[i] = (ext[i] >= 'A' && ext[i] <= 'Z') ? (char)(ext[i] + 32) : ext[i];
    if ((m->n_used + 1) * 2 > m->n_slots && grow(m) < 0)
        return -1;
    mime_slot *sl = find_slot(m, low, n);
    if (sl->ext)
        return 0;
    long off = arena_add(m, low, n, NULL);
    if (off < 0)
        return -1;
    sl = find_slot(m, low, n); /* the arena may have moved, the slots did not */
    sl->ext = (uint32_t)off + 1;
    sl->type = type;
    m->n_used++;
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* "type ext ext ..." ; '#' starts a comment. */
static int parse_line(static_mime *m, const char *line)
{
    const char *p = line;
    while (is_space(*p))
        p++;
    if (!*p || *p == '#')
        return 0;
    const char *t = p;
    while (*p && !is_space(*p) && *p != '#')
        p++;
    size_t tl = (size_t)(p - t);
    if (!memchr(t, '/', tl) || tl > 200)
        return 0;
    long type = -1;
    for (;;) {
        while (is_space(*p))
            p++;
        if (!*p || *p == '#')
            return 0;
        const char *e = p;
        while (*p && !is_space(*p) && *p != '#')
            p++;
        if (type < 0) {
            type = arena_add(m, t, tl, strncmp(t, "text/", 5) == 0 ? CHARSET : NULL);
            if (type < 0)
                return -1;
        }
        if (add_ext(m, e, (size_t)(p - e), (uint32_t)type) < 0)
            return -1;
    }
}

static_mime *static_mime_load(const char *path)
{
    static_mime *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    FILE *f = path ? fopen(path, "re") : NULL;
    if (!f)
        return m;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0)
        rc = parse_line(m, line);
    free(line);
    fclose(f);
    if (rc < 0) {
        static_mime_free(m);
        return NULL;
    }
    return m;
}

void static_mime_free(static_mime *m)
{
    if (!m)
        return;
    free(m->arena);
    free(m->slots);
    free(m);
}

size_t static_mime_file_count(const static_mime *m)
{
    return m->n_used;
}

const char *static_mime_lookup(const static_mime *m, const char *name, size_t len)
{
    const char *dot = NULL;
    for (size_t i = len; i > 0; i--) {
        if (name[i - 1] == '/')
            break;
        if (name[i - 1] == '.') {
            dot = name + i - 1;
            break;
        }
    }
    if (!dot)
        return STATIC_MIME_DEFAULT;
    size_t n = (size_t)(name + len - dot - 1);
    char low[EXT_MAX];
    if (n == 0 || n >= EXT_MAX)
        return STATIC_MIME_DEFAULT;
    for (size_t i = 0; i < n; i++)
        low[i] = (dot[1 + i] >= 'A' && dot[1 + i] <= 'Z') ? (char)(dot[1 + i] + 32) : dot[1 + i];
    const mime_slot *sl = m ? find_slot(m, low, n) : NULL;
    if (sl && sl->ext)
        return m->arena + sl->type;
    for (size_t i = 0; i < sizeof builtin_types / sizeof builtin_types[0]; i++)
        if (strlen(builtin_types[i].ext) == n && memcmp(builtin_types[i].ext, low, n) == 0)
            return builtin_types[i].type;
    return STATIC_MIME_DEFAULT;
}

/*
 * static.c - the `static:DIR` app: GET/HEAD of the files under DIR, sent
 * from memory (small files) or from an fd the engine passes to sendfile;
 * ETag/Last-Modified, conditional and single-range requests, index.html,
 * optional listings. Containment is static_path.c's job, HTTP semantics
 * static_http.c's, types static_mime.c's, remembering lookups static_cache.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/config.h"
#include "builtin.h"
#include "static_cache.h"
#include "static_http.h"
#include "static_mime.h"
#include "static_path.h"

#define INDEX_FILE "index.html"
#define TEXT_PLAIN "text/plain; charset=utf-8"

typedef struct static_app {
    static_root root;
    static_mime *mime;
    int listing;
    static_cache *cache; /* NULL: every request looks the file up */
    pagi_loop *loop;
} static_app;

static pagi_str str_of(const char *s)
{
    return (pagi_str){s, strlen(s)};
}
#define HDR(n, v) ((pagi_header){{(n), sizeof(n) - 1}, (v)})

/* ---- sending ---- */

/* Start + one final body (from content when not NULL); finishes the scope either way. */
static void respond_with(pagi_scope *s, int status, const pagi_header *h, size_t n,
                         const pagi_event *body, pagi_buf *content)
{
    int sse = pagi_scope_type_of(s) == PAGI_SCOPE_SSE; /* a decline: the same response */
    pagi_event start =
        PAGI_EVENT_INIT(sse ? PAGI_EV_SSE_HTTP_RESPONSE_START : PAGI_EV_HTTP_RESPONSE_START);
    start.status = status;
    start.headers = h;
    start.header_count = n;
    pagi_event b = *body;
    if (sse)
        b.type = PAGI_EV_SSE_HTTP_RESPONSE_BODY;
    if (pagi_send(s, &start, NULL, NULL) < 0 ||
        (content ? pagi_send_buf(s, &b, content, NULL, NULL) : pagi_send(s, &b, NULL, NULL)) < 0) {
        pagi_scope_finish(s, pagi_scope_error(s));
        return;
    }
    pagi_scope_finish(s, NULL);
}

static void respond(pagi_scope *s, int status, const pagi_header *h, size_t n,
                    const pagi_event *body)
{
    respond_with(s, status, h, n, body, NULL);
}

/* A short text/plain answer ("404 Not Found\n"), plus up to two extra headers. */
static void respond_text(pagi_scope *s, int status, const char *reason, const pagi_header *extra,
                         size_t n_extra)
{
    char text[64], clen[24];
    int tl = snprintf(text, sizeof text, "%d %s\n", status, reason);
    int cl = snprintf(clen, sizeof clen, "%d", tl);
    pagi_header h[4] = {
        HDR("content-type", str_of(TEXT_PLAIN)),
        HDR("content-length", ((pagi_str){clen, (size_t)cl})),
    };
    size_t n = 2;
    for (size_t i = 0; i < n_extra && n < 4; i++)
        h[n++] = extra[i];
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body = (pagi_str){text, (size_t)tl};
    respond(s, status, h, n, &body);
}

/* Percent-encode everything but unreserved bytes (and '/' when keep_slash). */
static int url_encode(buf *b, const char *s, size_t n, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
        if (plain ? buf_append(b, &s[i], 1)
                  : buf_append(b, (char[]){'%', hex[c >> 4], hex[c & 15]}, 3))
            return -1;
    }
    return 0;
}

/*
 * 301 to the slash form. The Location is rebuilt from the mount path and the
 * normalised path, never from raw_path: "//evil.example/dir" must not turn
 * into a protocol-relative redirect.
 */
static void redirect_dir(pagi_scope *s, const char *rel)
{
    buf loc = BUF_INIT;
    pagi_str root = pagi_scope_root_path(s), q = pagi_scope_query_string(s);
    int rc = url_encode(&loc, root.ptr, root.len, 1);
    rc = rc ? rc : buf_append(&loc, "/", 1);
    if (*rel) { /* "" is the mount point itself: "/static" -> "/static/" */
        rc = rc ? rc : url_encode(&loc, rel, strlen(rel), 1);
        rc = rc ? rc : buf_append(&loc, "/", 1);
    }
    if (!rc && q.len)
        rc = buf_append(&loc, "?", 1) ? -1 : buf_append(&loc, q.ptr, q.len);
    if (rc) {
        buf_free(&loc);
        respond_text(s, 500, "Internal Server Error", NULL, 0);
        return;
    }
    pagi_header h = HDR("location", ((pagi_str){buf_head(&loc), buf_size(&loc)}));
    respond_text(s, 301, "Moved Permanently", &h, 1);
    buf_free(&loc);
}

/* ---- files ---- */

/*
 * The request's validators and its Range, in one pass over its headers (the
 * first of each name counts, as pagi_scope_header's): six lookups by name
 * were a tenth of a small file's cost over HTTP/2.
 */
static void validators_of(pagi_scope *s, static_validators *v, pagi_str *range, int *has_range)
{
    memset(v, 0, sizeof *v);
    *has_range = 0;
    size_t n = 0;
    const pagi_header *h = pagi_scope_headers(s, &n);
    for (size_t i = 0; h && i < n; i++) {
        pagi_str nm = h[i].name;
        if (nm.len < 5 || (nm.ptr[0] | 0x20) != (nm.len == 5 ? 'r' : 'i'))
            continue; /* every name looked for starts with i, but "range" */
#define TAKE(lit, has, val)                                                                        \
    if (nm.len == sizeof lit - 1 && !strncasecmp(nm.ptr, lit, nm.len)) {                           \
        if (!(has)) {                                                                              \
            (has) = 1;                                                                             \
            (val) = h[i].value;                                                                    \
        }                                                                                          \
        continue;                                                                                  \
    }
        TAKE("range", *has_range, *range)
        TAKE("if-match", v->has_if_match, v->if_match)
        TAKE("if-unmodified-since", v->has_if_unmodified, v->if_unmodified)
        TAKE("if-none-match", v->has_if_none_match, v->if_none_match)
        TAKE("if-modified-since", v->has_if_modified, v->if_modified)
        TAKE("if-range", v->has_if_range, v->if_range)
#undef TAKE
    }
    if (v->has_if_range)
        v->now = (int64_t)time(NULL);
}

/* The facts of an open regular file, prepared for its responses; takes fd. */
static void prepare_file(static_app *a, static_file *f, int fd, const struct stat *st,
                         const char *name)
{
    memset(f, 0, sizeof *f);
    f->fd = fd;
    f->size = st->st_size;
    f->mtime = st->st_mtim.tv_sec;
    /* Nanoseconds in the tag: two writes of the same size within a second differ. */
    f->mtime_ns = f->mtime * 1000000000 + st->st_mtim.tv_nsec;
    f->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
    f->dev = st->st_dev;
    f->ino = st->st_ino;
    f->etag_len = static_etag(f->etag, f->mtime_ns, f->size);
    f->last_modified_len = static_http_date(f->last_modified, f->mtime);
    f->size_text_len = (size_t)snprintf(f->size_text, sizeof f->size_text, "%" PRId64, f->size);
    f->type = static_mime_lookup(a->mime, name, strlen(name));
}

/* Serve a prepared file (a cache entry, or one for this response alone). */
static void serve_prepared(pagi_scope *s, const static_file *f, int is_get)
{
    char clen[24], crange[80];
    int64_t size = f->size;
    static_validators v;
    pagi_str range;
    int has_range;
    validators_of(s, &v, &range, &has_range);
    static_cond cond = static_evaluate(&v, f->etag, f->etag_len, f->mtime);
    pagi_header h[7] = {
        HDR("etag", ((pagi_str){f->etag, f->etag_len})),
        HDR("last-modified", ((pagi_str){f->last_modified, f->last_modified_len})),
        HDR("accept-ranges", str_of("bytes")),
    };
    size_t n = 3;
    if (cond == STATIC_COND_NOT_MODIFIED) {
        pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
        respond(s, 304, h, n, &body);
        return;
    }
    if (cond == STATIC_COND_PRECONDITION) {
        respond_text(s, 412, "Precondition Failed", NULL, 0);
        return;
    }
    int64_t first = 0, last = size - 1;
    int status = 200;
    /* Range applies to GET only (RFC 9110 section 14.2). */
    if (is_get && cond == STATIC_COND_RANGE_ALLOWED && has_range) {
        static_range_rc r = static_parse_range(range, size, &first, &last);
        if (r == STATIC_RANGE_UNSATISFIABLE) {
            int k = snprintf(crange, sizeof crange, "bytes */%" PRId64, size);
            pagi_header x = HDR("content-range", ((pagi_str){crange, (size_t)k}));
            respond_text(s, 416, "Range Not Satisfiable", &x, 1);
            return;
        }
        if (r == STATIC_RANGE_OK) {
            status = 206;
            int k = snprintf(crange, sizeof crange, "bytes %" PRId64 "-%" PRId64 "/%" PRId64, first,
                             last, size);
            h[n++] = HDR("content-range", ((pagi_str){crange, (size_t)k}));
        } else {
            first = 0;
            last = size - 1;
        }
    }
    int64_t len = last - first + 1;
    if (len == size) { /* the whole file: its length was written when it was prepared */
        h[n++] = HDR("content-length", ((pagi_str){f->size_text, f->size_text_len}));
    } else {
        int k = snprintf(clen, sizeof clen, "%" PRId64, len);
        h[n++] = HDR("content-length", ((pagi_str){clen, (size_t)k}));
    }
    h[n++] = HDR("content-type", str_of(f->type));
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    if (len > 0 && f->body && len == size) {
        /* The whole of a file held in memory: the send takes its own reference. */
        respond_with(s, status, h, n, &body, f->body);
        return;
    }
    if (len > 0 && f->body) {
        body.body = (pagi_str){(const char *)pagi_buf_data(f->body) + first, (size_t)len};
    } else if (len > 0) { /* length 0 would mean "to EOF": an empty file sends the empty body */
        body.use_fd = 1;
        body.fd = f->fd; /* the engine takes its own duplicate during the send */
        body.offset = first;
        body.length = len;
    }
    respond(s, status, h, n, &body);
}

/*
 * The very file remembered, unchanged: a write changes its mtime, a chmod,
 * link or rename its ctime, a replacement its inode. Serving a remembered
 * entry on this proof is safe whatever the path now resolves through: it is
 * the file that was opened (and checked for containment) before.
 */
static int same_file(const static_file *x, const struct stat *st)
{
    return x->dev == st->st_dev && x->ino == st->st_ino && x->size == st->st_size &&
           x->mtime_ns == (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec &&
           x->ctime_ns == (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

/*
 * Serve an open regular file found under key (the relative path looked up);
 * takes fd. name gives the type. The cache, if any, keeps it for the next
 * requests: or, when it already held this very file, is trusted again.
 */
static void serve_file(pagi_scope *s, static_app *a, int fd, const struct stat *st,
                       const char *name, const char *key, int is_get)
{
    if (a->cache) {
        double now = pagi_loop_now(a->loop);
        size_t kl = strlen(key);
        const static_file *old = static_cache_peek(a->cache, key, kl);
        if (old && same_file(old, st)) {
            close(fd);
            static_cache_touch(a->cache, key, kl, now);
            serve_prepared(s, old, is_get);
            return;
        }
        static_file f;
        prepare_file(a, &f, fd, st, name);
        const static_file *kept = static_cache_put(a->cache, key, kl, &f, now);
        if (kept) {
            serve_prepared(s, kept, is_get);
            return;
        }
    }
    static_file f;
    prepare_file(a, &f, fd, st, name);
    serve_prepared(s, &f, is_get);
    close(fd);
}

/*
 * A request whose file the cache holds: served with no system call of ours
 * while the entry is trusted, else after one stat shows the path still
 * leads to the same, unchanged file. Returns 0 when the cache cannot answer
 * (then the request takes the whole lookup, and its result is kept).
 */
static int serve_cached(pagi_scope *s, static_app *a, const char *rel, int dir_form, int is_get)
{
    char key[STATIC_PATH_MAX + sizeof INDEX_FILE + 1];
    size_t rl = strlen(rel), kl = rl; /* rel fits STATIC_PATH_MAX, so key holds it all */
    memcpy(key, rel, rl);
    if (dir_form) {
        if (rl)
            key[kl++] = '/';
        memcpy(key + kl, INDEX_FILE, sizeof INDEX_FILE); /* with its NUL */
        kl += sizeof INDEX_FILE - 1;
    }
    key[kl] = '\0';
    double now = pagi_loop_now(a->loop);
    const static_file *f = static_cache_get(a->cache, key, kl, now);
    struct stat fst;
    if (f && f->fd >= 0 && (fstat(f->fd, &fst) < 0 || !same_file(f, &fst))) {
        /* Kept open under cache_valid and written in place since: its old
         * length and ETag would go out with new bytes. Look it up again. */
        static_cache_drop(a->cache, key, kl);
        return 0;
    }
    if (!f) {
        struct stat st;
        f = static_cache_peek(a->cache, key, kl);
        if (!f || fstatat(a->root.fd, key, &st, 0) < 0 || !same_file(f, &st))
            return 0;
        static_cache_touch(a->cache, key, kl, now);
    }
    serve_prepared(s, f, is_get);
    return 1;
}

/* ---- listings ---- */

static int html_escape(buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                rep = "?";
        }
        if (rep ? buf_append_str(b, rep) : buf_append(b, &s[i], 1))
            return -1;
    }
    return 0;
}

static int cmp_names(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

#define LISTING_MAX_ENTRIES 10000

/* Append the sorted, escaped entries of the open directory dfd (consumed). */
static int list_entries(buf *b, int dfd)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && n < LISTING_MAX_ENTRIES && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue; /* hidden, and never served anyway */
        int is_dir = e->d_type == DT_DIR;
        struct stat st;
        if (e->d_type == DT_UNKNOWN && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            is_dir = S_ISDIR(st.st_mode);
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **v = realloc(names, nc * sizeof *v);
            if (!v) {
                rc = -1;
                break;
            }
            names = v;
            cap = nc;
        }
        size_t len = strlen(e->d_name);
        if (!(names[n] = malloc(len + 2))) {
            rc = -1;
            break;
        }
        memcpy(names[n], e->d_name, len);
        names[n][len] = is_dir ? '/' : '\0'; /* directories sort and show with a slash */
        names[n][len + 1] = '\0';
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        int dir = names[i][len - 1] == '/';
        if (rc == 0)
            rc = (buf_append_str(b, "<li><a href=\"") || url_encode(b, names[i], len - dir, 0) ||
                  buf_append_str(b, dir ? "/\">" : "\">") || html_escape(b, names[i], len) ||
                  buf_append_str(b, "</a></li>\n"))
                     ? -1
                     : 0;
        free(names[i]);
    }
    free(names);
    return rc;
}

/* A small HTML index of the directory dfd (consumed); names escaped twice over. */
static void send_listing(pagi_scope *s, int dfd, const char *rel)
{
    buf b = BUF_INIT, title = BUF_INIT;
    pagi_str root = pagi_scope_root_path(s);
    int rc = buf_append(&title, root.ptr, root.len) || buf_append(&title, "/", 1) ||
             (*rel && (buf_append_str(&title, rel) || buf_append(&title, "/", 1)));
    rc = rc ||
         buf_append_str(&b,
                        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of ") ||
         html_escape(&b, buf_head(&title), buf_size(&title)) ||
         buf_append_str(&b, "</title></head>\n<body><h1>Index of ") ||
         html_escape(&b, buf_head(&title), buf_size(&title)) ||
         buf_append_str(&b, "</h1>\n<ul>\n") ||
         (*rel && buf_append_str(&b, "<li><a href=\"../\">../</a></li>\n"));
    if (rc)
        close(dfd);
    else
        rc = list_entries(&b, dfd);
    rc = rc || buf_append_str(&b, "</ul></body></html>\n");
    buf_free(&title);
    if (rc) {
        buf_free(&b);
        respond_text(s, 500, "Internal Server Error", NULL, 0);
        return;
    }
    char clen[24];
    int k = snprintf(clen, sizeof clen, "%zu", buf_size(&b));
    pagi_header h[] = {
        HDR("content-type", str_of("text/html; charset=utf-8")),
        HDR("content-length", ((pagi_str){clen, (size_t)k})),
        HDR("cache-control", str_of("no-cache")),
    };
    pagi_event body = PAGI_EVENT_INIT(PAGI_EV_HTTP_RESPONSE_BODY);
    body.body = (pagi_str){buf_head(&b), buf_size(&b)};
    respond(s, 200, h, sizeof h / sizeof h[0], &body); /* the body is copied by the send */
    buf_free(&b);
}

/* ---- the request ---- */

static void open_failed(pagi_scope *s, int err)
{
    if (err == -EACCES || err == -EPERM)
        respond_text(s, 403, "Forbidden", NULL, 0);
    else if (err == -EMFILE || err == -ENFILE || err == -ENOMEM)
        respond_text(s, 503, "Service Unavailable", NULL, 0);
    else /* ENOENT, ENOTDIR, EXDEV (a link out of the root), ELOOP, ... */
        respond_text(s, 404, "Not Found", NULL, 0);
}

/* A directory reached with its trailing slash: index.html, a listing, or 404. */
static void serve_dir(pagi_scope *s, static_app *a, int dfd, const char *rel, int is_get)
{
    char index[STATIC_PATH_MAX + sizeof INDEX_FILE + 1];
    snprintf(index, sizeof index, "%s%s%s", rel, *rel ? "/" : "", INDEX_FILE);
    int fd = static_open(&a->root, index);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        close(dfd);
        serve_file(s, a, fd, &st, INDEX_FILE, index, is_get);
        return;
    }
    if (fd >= 0)
        close(fd);
    if (a->listing) {
        send_listing(s, dfd, rel);
        return;
    }
    close(dfd);
    respond_text(s, 404, "Not Found", NULL, 0);
}

/* At a mount point, only raw_path still tells "/static" from "/static/". */
static int raw_ends_with_slash(const pagi_scope *s)
{
    pagi_str raw = pagi_scope_raw_path(s);
    if (raw.len && raw.ptr[raw.len - 1] == '/')
        return 1;
    return raw.len >= 3 && raw.ptr[raw.len - 3] == '%' && raw.ptr[raw.len - 2] == '2' &&
           (raw.ptr[raw.len - 1] == 'f' || raw.ptr[raw.len - 1] == 'F');
}

static void static_handle(pagi_scope *s, void *instance)
{
    static_app *a = instance;
    if (pagi_scope_type_of(s) == PAGI_SCOPE_SSE) {
        /* Files are not event streams: decline what asked for one. */
        respond_text(s, 406, "Not Acceptable", NULL, 0);
        return;
    }
    if (pagi_scope_type_of(s) != PAGI_SCOPE_HTTP) {
        pagi_scope_finish(s, NULL); /* WebSocket: the engine refuses the handshake (403) */
        return;
    }
    const char *method = pagi_scope_method(s);
    int is_get = strcmp(method, "GET") == 0;
    if (!is_get && strcmp(method, "HEAD") != 0) {
        pagi_header allow = HDR("allow", str_of("GET, HEAD"));
        respond_text(s, 405, "Method Not Allowed", &allow, 1);
        return;
    }
    /* Files are found by what follows the mount point (path minus root_path). */
    pagi_str full = pagi_scope_path(s), root = pagi_scope_root_path(s);
    pagi_str path = {full.ptr + root.len, full.len - root.len};
    if (path.len == 0)
        path = (pagi_str){"/", 1};
    char rel[STATIC_PATH_MAX];
    int dir_form = 0;
    switch (static_path_normalize(path.ptr, path.len, rel, &dir_form)) {
    case STATIC_PATH_OK:
        break;
    case STATIC_PATH_BAD:
        respond_text(s, 400, "Bad Request", NULL, 0);
        return;
    default:
        respond_text(s, 404, "Not Found", NULL, 0);
        return;
    }
    if (pagi_scope_root_path(s).len && path.len == 1)
        dir_form = raw_ends_with_slash(s); /* "/static" vs "/static/": both have path "/" */
    if (a->cache && serve_cached(s, a, rel, dir_form, is_get))
        return;
    int fd = static_open(&a->root, rel);
    if (fd < 0) {
        open_failed(s, fd);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        respond_text(s, 500, "Internal Server Error", NULL, 0);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        if (!dir_form) {
            close(fd);
            redirect_dir(s, rel);
            return;
        }
        serve_dir(s, a, fd, rel, is_get);
        return;
    }
    if (!S_ISREG(st.st_mode) || dir_form) {
        close(fd); /* devices, FIFOs, sockets; or "file.txt/" */
        respond_text(s, 404, "Not Found", NULL, 0);
        return;
    }
    serve_file(s, a, fd, &st, rel, rel, is_get);
}

/* ---- instance ---- */

void *static_app_create(const char *dir, const static_options *o, pagi_loop *loop, const char **err)
{
    (void)loop;
    if (!dir || !*dir) {
        *err = "static: needs a directory (static:DIR)";
        return NULL;
    }
    static_app *a = calloc(1, sizeof *a);
    if (!a) {
        *err = "static: out of memory";
        return NULL;
    }
    a->listing = o ? o->listing : 0;
    a->loop = loop;
    if (static_root_open(&a->root, dir, o ? o->follow_symlinks : 0, STATIC_RESOLVE_AUTO, err) < 0) {
        free(a);
        return NULL;
    }
    a->mime = static_mime_load(STATIC_MIME_SYSTEM_FILE);
    size_t entries = o ? o->cache_entries : CONFIG_STATIC_CACHE_ENTRIES;
    if (entries && loop) {
        a->cache = static_cache_new(entries, o ? o->cache_bytes : CONFIG_STATIC_CACHE_BYTES,
                                    o ? o->cache_valid : CONFIG_STATIC_CACHE_VALID);
        if (!a->cache) {
            static_mime_free(a->mime);
            a->mime = NULL;
        }
    }
    if (!a->mime) {
        static_root_close(&a->root);
        free(a);
        *err = "static: out of memory";
        return NULL;
    }
    return a;
}

static void *static_create(const char *arg, pagi_loop *loop, const char **err)
{
    return static_app_create(arg, NULL, loop, err);
}

static void static_destroy(void *instance)
{
    static_app *a = instance;
    if (!a)
        return;
    static_cache_free(a->cache);
    static_root_close(&a->root);
    static_mime_free(a->mime);
    free(a);
}

const pagi_app app_static = {
    .abi_version = PAGI_ABI_VERSION,
    .name = "static",
    .create = static_create,
    .handle = static_handle,
    .destroy = static_destroy,
};

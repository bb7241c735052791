/*
 * pagi_easy_router.c - the path router of pagi_easy.h (pagi_router(3), ABI
 * 2.5): routes of a method and a pattern of literal, named and wildcard
 * segments, matched against the scope's path below its mount point with no
 * allocation per dispatch, and the 404 / 405 + allow answers when none does.
 */
#include <pagi/pagi_easy.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scope.h"
#include "common/hexdigit.h"

#define NAME_MAX_LEN 63
#define METHOD_MAX_LEN 32

/* A segment's kind; a higher value is more specific and wins a tie. */
enum { SEG_WILDCARD = 0, SEG_NAMED = 1, SEG_LITERAL = 2 };
/* What a route serves: http requests (and sse scopes no SSE route takes), sse, websocket. */
enum { ROUTE_HTTP, ROUTE_SSE, ROUTE_WEBSOCKET };

typedef struct route_seg {
    int kind;
    const char *text; /* the literal, or the name without ':' / '*' */
    size_t len;
} route_seg;

/* One allocation: the struct, its segments, then the method and pattern copies. */
typedef struct route {
    int serves;         /* ROUTE_* */
    const char *method; /* ROUTE_HTTP: the method, or NULL for any */
    size_t method_len;
    int is_get; /* method is GET: it serves HEAD too */
    const char *pattern;
    pagi_route_cb cb;
    void *ud;
    size_t nseg;
    int wildcard; /* the last segment is a wildcard */
    route_seg seg[];
} route;

/* Routes are allocated one by one, so a callback's params stay valid even
 * if it adds a route (the array may move, a route never does). */
struct pagi_router {
    route **v;
    size_t n, cap;
    char err[256];
};

/* ---- the request's path, split once per dispatch ---- */

typedef struct path_seg {
    const char *p; /* into pagi_scope_path(s): decoded bytes */
    size_t len;
} path_seg;

/* One slot more than the longest pattern: a path that fills it has more
 * segments than any pattern without a wildcard. */
#define PATH_SLOTS (PAGI_ROUTE_MAX_SEGMENTS + 1)

typedef struct req_path {
    path_seg seg[PATH_SLOTS];
    size_t n;        /* segments stored; PATH_SLOTS: that many or more */
    const char *end; /* the decoded path's end: where a wildcard's value ends */
} req_path;

struct pagi_route_params {
    const route *rt;
    const req_path *path;
};

/* The decoded byte at raw[i] and the raw bytes it took, decoding as the
 * server decoded the path (a "%XX" of two hex digits, any other byte as it
 * is: h1_percent_decode). */
static size_t raw_step(const char *raw, size_t i, size_t len, char *out)
{
    if (raw[i] == '%' && i + 2 < len) {
        int hi = hex_digit_value((unsigned char)raw[i + 1]),
            lo = hex_digit_value((unsigned char)raw[i + 2]);
        if (hi >= 0 && lo >= 0) {
            *out = (char)(hi << 4 | lo);
            return 3;
        }
    }
    *out = raw[i];
    return 1;
}

/*
 * Split dec (the decoded path) below its first root bytes into segments,
 * with the boundaries where raw has a '/': walking raw and dec side by
 * side, so each segment is a slice of dec and an encoded %2F stays inside
 * its segment. Returns 0; -1 when raw does not decode to dec (a scope made
 * some other way), and the caller splits dec itself (split_plain).
 * rp->n 0: no path below root that starts with '/' (matches no pattern).
 */
static int split_path(req_path *rp, pagi_str raw, pagi_str dec, size_t root)
{
    size_t i = 0, j = 0;
    char c;
    rp->n = 0;
    rp->end = dec.ptr + dec.len;
    for (; j < root; j++) {
        if (i >= raw.len)
            return -1;
        i += raw_step(raw.ptr, i, raw.len, &c);
        if (c != dec.ptr[j])
            return -1;
    }
    if (root == dec.len) { /* the mount point itself is its "/" */
        rp->seg[rp->n++] = (path_seg){rp->end, 0};
        return 0;
    }
    /* The separator after the mount point (or the path's first '/'), however
     * the client wrote it: the mount matched at a decoded '/'. */
    if (dec.ptr[j] != '/')
        return 0;
    if (i >= raw.len)
        return -1;
    i += raw_step(raw.ptr, i, raw.len, &c);
    if (c != '/')
        return -1;
    size_t start = ++j;
    for (;;) {
        if (i >= raw.len || raw.ptr[i] == '/') {
            rp->seg[rp->n++] = (path_seg){dec.ptr + start, j - start};
            if (i >= raw.len)
                return j == dec.len ? 0 : -1;
            if (rp->n == PATH_SLOTS)
                return 0; /* more than any pattern takes: the rest is a wildcard's */
            if (j >= dec.len || dec.ptr[j] != '/')
                return -1;
            i++;
            start = ++j;
            continue;
        }
        i += raw_step(raw.ptr, i, raw.len, &c);
        if (j >= dec.len || dec.ptr[j] != c)
            return -1;
        j++;
    }
}

/* Split dec below root at every '/' (nothing percent-encoded in it, or a
 * raw path that is no guide): as split_path, with memchr. */
static void split_plain(req_path *rp, pagi_str dec, size_t root)
{
    rp->n = 0;
    rp->end = dec.ptr + dec.len;
    if (root == dec.len) {
        rp->seg[rp->n++] = (path_seg){rp->end, 0};
        return;
    }
    if (dec.ptr[root] != '/')
        return;
    const char *p = dec.ptr + root + 1;
    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(rp->end - p));
        const char *e = slash ? slash : rp->end;
        rp->seg[rp->n++] = (path_seg){p, (size_t)(e - p)};
        if (slash == NULL || rp->n == PATH_SLOTS)
            return;
        p = slash + 1;
    }
}

static void path_of(const pagi_scope *s, req_path *rp)
{
    pagi_str dec = pagi_scope_path(s), raw = pagi_scope_raw_path(s);
    size_t root = pagi_scope_root_path(s).len;
    /* The same length: nothing was decoded (each %XX shrinks by two), and
     * HTTP/1.1 hands both as the same bytes. */
    if (raw.len == dec.len && (raw.ptr == dec.ptr || memcmp(raw.ptr, dec.ptr, dec.len) == 0))
        split_plain(rp, dec, root);
    else if (split_path(rp, raw, dec, root) != 0)
        split_plain(rp, dec, root);
}

/* ---- matching ---- */

static int route_fits_length(const route *rt, const req_path *rp)
{
    return rt->wildcard ? rp->n >= rt->nseg : rp->n == rt->nseg;
}

static int route_matches_path(const route *rt, const req_path *rp)
{
    if (!route_fits_length(rt, rp))
        return 0;
    for (size_t k = 0; k < rt->nseg; k++) {
        const route_seg *g = &rt->seg[k];
        const path_seg *p = &rp->seg[k];
        if (g->kind == SEG_LITERAL && (g->len != p->len || memcmp(g->text, p->p, p->len) != 0))
            return 0;
        if (g->kind == SEG_NAMED && p->len == 0)
            return 0;
    }
    return 1;
}

/* > 0 when a is more specific than b for a path both match: the first
 * segment where their kinds differ decides. */
static int specificity_cmp(const route *a, const route *b)
{
    size_t n = a->nseg < b->nseg ? a->nseg : b->nseg;
    for (size_t k = 0; k < n; k++)
        if (a->seg[k].kind != b->seg[k].kind)
            return a->seg[k].kind - b->seg[k].kind;
    return 0;
}

/* The request's method, measured once per dispatch. */
typedef struct req_method {
    const char *m;
    size_t len;
    int head;
} req_method;

/* How well rt's method fits the method of a scope served as rt->serves: 0
 * not at all; 3 exactly (or the pseudo-method); 2 a GET route for a HEAD;
 * 1 any method. */
static int method_fit(const route *rt, const req_method *m)
{
    if (rt->serves != ROUTE_HTTP)
        return 3;
    if (rt->method == NULL)
        return 1;
    if (rt->method_len == m->len && memcmp(rt->method, m->m, m->len) == 0)
        return 3;
    return m->head && rt->is_get ? 2 : 0;
}

/* The best route for the path among those serving `serves` (with method m),
 * or NULL. The cheap tests first: what it serves, its number of segments. */
static const route *pick(const pagi_router *r, const req_path *rp, int serves, const req_method *m)
{
    const route *best = NULL;
    int best_fit = 0;
    for (size_t i = 0; i < r->n; i++) {
        const route *rt = r->v[i];
        if (rt->serves != serves || !route_fits_length(rt, rp))
            continue;
        int fit = method_fit(rt, m);
        if (fit == 0 || !route_matches_path(rt, rp))
            continue;
        int cmp = best ? specificity_cmp(rt, best) : 1;
        if (cmp > 0 || (cmp == 0 && fit > best_fit)) {
            best = rt;
            best_fit = fit;
        }
    }
    return best;
}

/* Append m to the comma-separated list unless it is there already. */
static void allow_add(char *list, size_t cap, const char *m)
{
    size_t ml = strlen(m), bl = strlen(list);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t tl = e ? (size_t)(e - p) : strlen(p);
        if (tl == ml && memcmp(p, m, ml) == 0)
            return;
        p = e ? e + 2 : p + tl;
    }
    if (bl + (bl ? 2 : 0) + ml + 1 > cap)
        return; /* bounded: at most cap bytes of methods */
    if (bl) {
        memcpy(list + bl, ", ", 2);
        bl += 2;
    }
    memcpy(list + bl, m, ml + 1);
}

/* The methods of the http routes whose pattern matches the path, HEAD with
 * GET; empty when none does. */
static void allow_of(const pagi_router *r, const req_path *rp, char *list, size_t cap)
{
    int get = 0;
    list[0] = '\0';
    for (size_t i = 0; i < r->n; i++) {
        const route *rt = r->v[i];
        if (rt->serves != ROUTE_HTTP || rt->method == NULL || !route_matches_path(rt, rp))
            continue;
        allow_add(list, cap, rt->method);
        get |= rt->is_get;
    }
    if (get)
        allow_add(list, cap, "HEAD");
}

/* Refuse fn's call without finishing s (as pagi_easy.c's responses do). */
static int refuse(pagi_scope *s, const char *what)
{
    scope_misuse_call(s, "pagi_router_dispatch", "%s", what);
    return scope_fail(s, "pagi_router_dispatch: %s", what);
}

/* Nothing matched: 404, or 405 with allow. */
static int answer_unmatched(pagi_scope *s, const char *allow)
{
    if (pagi_scope_type_of(s) == PAGI_SCOPE_WEBSOCKET &&
        !pagi_scope_has_extension(s, "websocket.http.response")) {
        pagi_scope_finish(s, NULL); /* the handshake is refused: 403 */
        return 1;
    }
    int rc;
    if (allow[0] != '\0') {
        pagi_header h = {PAGI_STR("allow"), {allow, strlen(allow)}};
        rc = pagi_respond_headers(s, 405, "text/plain; charset=utf-8", &h, 1,
                                  "method not allowed\n", strlen("method not allowed\n"));
    } else {
        rc = pagi_respond_text(s, 404, "not found\n");
    }
    return rc == 0 ? 1 : -1;
}

int pagi_router_dispatch(pagi_router *r, pagi_scope *s)
{
    if (!scope_live(s, "pagi_router_dispatch"))
        return -1;
    if (r == NULL)
        return refuse(s, "NULL router");
    pagi_scope_type t = pagi_scope_type_of(s);
    if (t == PAGI_SCOPE_LIFESPAN)
        return refuse(s, "a lifespan scope has no path (pagi_lifespan_run runs it)");
    req_path rp;
    path_of(s, &rp);
    req_method m = {pagi_scope_method(s), 0, 0};
    m.len = strlen(m.m);
    m.head = m.len == 4 && memcmp(m.m, "HEAD", 4) == 0;
    const route *rt = NULL;
    if (t == PAGI_SCOPE_WEBSOCKET) {
        rt = pick(r, &rp, ROUTE_WEBSOCKET, &m);
    } else {
        if (t == PAGI_SCOPE_SSE)
            rt = pick(r, &rp, ROUTE_SSE, &m);
        if (rt == NULL)
            rt = pick(r, &rp, ROUTE_HTTP, &m);
    }
    if (rt != NULL) {
        pagi_route_params params = {rt, &rp};
        rt->cb(s, &params, rt->ud);
        return 0;
    }
    /* Methods fit at most 2 + (METHOD_MAX_LEN + 2) bytes each: 16 of them. */
    char allow[16 * (METHOD_MAX_LEN + 2)];
    allow[0] = '\0';
    if (t != PAGI_SCOPE_WEBSOCKET)
        allow_of(r, &rp, allow, sizeof allow);
    return answer_unmatched(s, allow);
}

pagi_str pagi_route_param(const pagi_route_params *params, const char *name)
{
    if (params == NULL || name == NULL)
        return (pagi_str){NULL, 0};
    const route *rt = params->rt;
    size_t nl = strlen(name);
    for (size_t k = 0; k < rt->nseg; k++) {
        const route_seg *g = &rt->seg[k];
        if (g->kind == SEG_LITERAL || g->len != nl || memcmp(g->text, name, nl) != 0)
            continue;
        const path_seg *p = &params->path->seg[k];
        if (g->kind == SEG_NAMED)
            return (pagi_str){p->p, p->len};
        return (pagi_str){p->p, (size_t)(params->path->end - p->p)};
    }
    return (pagi_str){NULL, 0};
}

/* ---- building the table ---- */

pagi_router *pagi_router_new(void)
{
    return calloc(1, sizeof(pagi_router));
}

void pagi_router_free(pagi_router *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i]);
    free(r->v);
    free(r);
}

const char *pagi_router_error(const pagi_router *r)
{
    return r ? r->err : "pagi_router_error: NULL router";
}

__attribute__((format(printf, 3, 4))) static int add_fail(pagi_router *r, int err, const char *fmt,
                                                          ...)
{
    int n = snprintf(r->err, sizeof r->err, "pagi_router_add: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, sizeof r->err - (size_t)n, fmt, ap);
    va_end(ap);
    errno = err;
    return -1;
}

static int is_tchar(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int is_name_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Which scopes method serves, or -1 (r->err set) for one that is not a token. */
static int method_serves(pagi_router *r, const char *method)
{
    if (method == NULL)
        return ROUTE_HTTP;
    if (strcmp(method, PAGI_ROUTE_WEBSOCKET) == 0)
        return ROUTE_WEBSOCKET;
    if (strcmp(method, PAGI_ROUTE_SSE) == 0)
        return ROUTE_SSE;
    size_t n = strlen(method);
    if (n == 0 || n > METHOD_MAX_LEN)
        return add_fail(r, EINVAL, "method \"%.40s\": 1-%d bytes", method, METHOD_MAX_LEN);
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)method[i]))
            return add_fail(r, EINVAL, "method \"%s\" is not an HTTP token", method);
        else if (method[i] >= 'a' && method[i] <= 'z') /* pagid answers such requests 400 */
            return add_fail(r, EINVAL,
                            "method \"%s\" has lower-case letters: methods are case-sensitive "
                            "and pagid serves upper-case ones only (\"GET\", not \"get\")",
                            method);
    return ROUTE_HTTP;
}

/*
 * Check pattern and count its segments; with rt, also fill rt->seg (texts
 * pointing into pat, rt's own copy of the pattern). 0, or -1 with r->err.
 */
static int parse_pattern(pagi_router *r, const char *pat, route *rt, size_t *nseg_out)
{
    if (pat[0] != '/')
        return add_fail(r, EINVAL, "pattern \"%.80s\" does not start with '/'", pat);
    size_t nseg = 0, nparams = 0;
    const char *p = pat + 1;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int kind = p[0] == ':' ? SEG_NAMED : p[0] == '*' ? SEG_WILDCARD : SEG_LITERAL;
        if (len == 0 && e != NULL)
            return add_fail(r, EINVAL, "pattern \"%.80s\": an empty segment", pat);
        if (++nseg > PAGI_ROUTE_MAX_SEGMENTS)
            return add_fail(r, EINVAL, "pattern \"%.80s\": more than %d segments", pat,
                            PAGI_ROUTE_MAX_SEGMENTS);
        const char *text = p;
        if (kind != SEG_LITERAL) {
            text = p + 1;
            len--;
            if (len == 0 || len > NAME_MAX_LEN)
                return add_fail(r, EINVAL, "pattern \"%.80s\": a name of 1-%d bytes after '%c'",
                                pat, NAME_MAX_LEN, p[0]);
            for (size_t i = 0; i < len; i++)
                if (!is_name_char((unsigned char)text[i]))
                    return add_fail(r, EINVAL,
                                    "pattern \"%.80s\": name \"%.*s\" is not of [A-Za-z0-9_]", pat,
                                    (int)len, text);
            if (kind == SEG_WILDCARD && e != NULL)
                return add_fail(r, EINVAL, "pattern \"%.80s\": a wildcard must be last", pat);
            if (++nparams > PAGI_ROUTE_MAX_PARAMS)
                return add_fail(r, EINVAL, "pattern \"%.80s\": more than %d names", pat,
                                PAGI_ROUTE_MAX_PARAMS);
            for (size_t k = 0; rt && k < nseg - 1; k++)
                if (rt->seg[k].kind != SEG_LITERAL && rt->seg[k].len == len &&
                    memcmp(rt->seg[k].text, text, len) == 0)
                    return add_fail(r, EINVAL, "pattern \"%.80s\": the name \"%.*s\" twice", pat,
                                    (int)len, text);
        } else if (memchr(p, '%', len) != NULL) {
            return add_fail(r, EINVAL,
                            "pattern \"%.80s\": '%%' in a literal (literals match the decoded "
                            "path: write them decoded)",
                            pat);
        }
        if (rt != NULL) {
            rt->seg[nseg - 1] = (route_seg){kind, text, len};
            rt->wildcard = kind == SEG_WILDCARD;
        }
        if (e == NULL)
            break;
        p = e + 1;
    }
    *nseg_out = nseg;
    return 0;
}

/* Same method and same shape (kinds and literals; names aside): the later
 * one could never win. */
static int route_same(const route *a, const route *b)
{
    if (a->serves != b->serves || (a->method == NULL) != (b->method == NULL) ||
        (a->method && strcmp(a->method, b->method) != 0) || a->nseg != b->nseg)
        return 0;
    for (size_t k = 0; k < a->nseg; k++) {
        const route_seg *x = &a->seg[k], *y = &b->seg[k];
        if (x->kind != y->kind ||
            (x->kind == SEG_LITERAL && (x->len != y->len || memcmp(x->text, y->text, x->len))))
            return 0;
    }
    return 1;
}

int pagi_router_add(pagi_router *r, const char *method, const char *pattern, pagi_route_cb cb,
                    void *ud)
{
    if (r == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (pattern == NULL || cb == NULL)
        return add_fail(r, EINVAL, "NULL %s", pattern ? "callback" : "pattern");
    int serves = method_serves(r, method);
    size_t nseg;
    if (serves < 0 || parse_pattern(r, pattern, NULL, &nseg) != 0)
        return -1;
    size_t ml = serves == ROUTE_HTTP && method ? strlen(method) + 1 : 0;
    size_t pl = strlen(pattern) + 1;
    route *rt = malloc(sizeof *rt + nseg * sizeof(route_seg) + ml + pl);
    if (rt == NULL)
        return add_fail(r, ENOMEM, "out of memory");
    char *copies = (char *)(rt->seg + nseg);
    *rt = (route){.serves = serves, .cb = cb, .ud = ud, .nseg = nseg};
    if (ml) {
        memcpy(copies, method, ml);
        rt->method = copies;
        rt->method_len = ml - 1;
        rt->is_get = strcmp(method, "GET") == 0;
    }
    memcpy(copies + ml, pattern, pl);
    rt->pattern = copies + ml;
    if (parse_pattern(r, rt->pattern, rt, &nseg) != 0) { /* a name used twice */
        free(rt);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++)
        if (route_same(rt, r->v[i])) {
            add_fail(r, EINVAL, "%s %.80s: the same method and shape as %s %.80s, added earlier",
                     method ? method : "(any)", pattern, method ? method : "(any)",
                     r->v[i]->pattern);
            free(rt);
            return -1;
        }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        route **v = realloc(r->v, cap * sizeof *v);
        if (v == NULL) {
            free(rt);
            return add_fail(r, ENOMEM, "out of memory");
        }
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = rt;
    r->err[0] = '\0';
    return 0;
}

/*
 * h2_request.c - an HTTP/2 request head from its fields to a scope's
 * request facts (see h2_request.h). nghttp2 has already refused what RFC
 * 9113 calls malformed (upper-case names, connection-specific fields,
 * missing pseudo-headers on a non-CONNECT request); here are pagid's own
 * limits and the PAGI mapping.
 */
#include "h2_request.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "worker/http1/http1_parser.h" /* h1_percent_decode */

void h2_head_init(h2_head *hd)
{
    memset(hd, 0, offsetof(h2_head, fv_inline)); /* the inline arrays are written as used */
    for (int i = 0; i < H2_P__COUNT; i++)
        hd->pseudo[i] = -1;
}

static void drop_fields(h2_head *hd)
{
    if (hd->bytes && hd->bytes != hd->bytes_inline)
        free(hd->bytes);
    hd->bytes = NULL;
    hd->used = hd->cap = 0;
    if (hd->fv && hd->fv != hd->fv_inline)
        free(hd->fv);
    hd->fv = NULL;
    hd->nf = hd->capf = 0;
    for (int i = 0; i < H2_P__COUNT; i++)
        hd->pseudo[i] = -1;
}

void h2_head_free(h2_head *hd)
{
    drop_fields(hd);
}

int h2_head_has_protocol(const h2_head *hd)
{
    return hd->pseudo[H2_P_PROTOCOL] >= 0;
}

/* Room for n more bytes at hd->bytes + hd->used: NULL when out of memory
 * (or past 4 GiB, which the header limits never allow). */
static char *head_reserve(h2_head *hd, size_t n)
{
    if (!hd->bytes) {
        hd->bytes = hd->bytes_inline;
        hd->cap = H2_HEAD_INLINE_BYTES;
    }
    if (n > UINT32_MAX - hd->used)
        return NULL;
    if (hd->used + n > hd->cap) {
        size_t ncap = hd->cap;
        while (ncap < hd->used + n)
            ncap *= 2;
        if (ncap > UINT32_MAX)
            ncap = UINT32_MAX;
        char *v = hd->bytes == hd->bytes_inline ? malloc(ncap) : realloc(hd->bytes, ncap);
        if (!v)
            return NULL;
        if (hd->bytes == hd->bytes_inline)
            memcpy(v, hd->bytes_inline, hd->used);
        hd->bytes = v;
        hd->cap = (uint32_t)ncap;
    }
    return hd->bytes + hd->used;
}

static const char *fname(const h2_head *hd, const h2_field *f)
{
    return hd->bytes + f->name;
}

static const char *fvalue(const h2_head *hd, const h2_field *f)
{
    return hd->bytes + f->value;
}

/* Which pseudo-header a name is, or -1. Each memcmp has a constant
 * length: compared in words, no call (four of every request's fields). */
static int pseudo_slot(const uint8_t *name, size_t nl)
{
    switch (nl) {
    case 5:
        return !memcmp(name, ":path", 5) ? H2_P_PATH : -1;
    case 7:
        return !memcmp(name, ":method", 7)   ? H2_P_METHOD
               : !memcmp(name, ":scheme", 7) ? H2_P_SCHEME
                                             : -1;
    case 9:
        return !memcmp(name, ":protocol", 9) ? H2_P_PROTOCOL : -1;
    case 10:
        return !memcmp(name, ":authority", 10) ? H2_P_AUTHORITY : -1;
    default:
        return -1;
    }
}

int h2_head_add(h2_head *hd, const uint8_t *name, size_t nl, const uint8_t *value, size_t vl,
                size_t max_size, size_t max_count)
{
    hd->list_size += nl + vl + 32;
    if (hd->refuse)
        /* Refused: stop storing; far past the limit, stop the stream. */
        return hd->list_size > 2 * max_size + 65536 ? 1 : 0;
    if (hd->list_size > max_size || hd->nf >= max_count) {
        hd->refuse = 431;
        drop_fields(hd);
        return 0;
    }
    int slot = -1;
    if (nl && name[0] == ':') {
        slot = pseudo_slot(name, nl);
        if (slot < 0) {
            /* :protocol (extended CONNECT) is not enabled; nghttp2 refuses others. */
            hd->refuse = 400;
            drop_fields(hd);
            return 0;
        }
    }
    if (!hd->fv) {
        hd->fv = hd->fv_inline;
        hd->capf = H2_HEAD_INLINE_FIELDS;
    } else if (hd->nf == hd->capf) {
        size_t ncap = hd->capf * 2;
        h2_field *v =
            hd->fv == hd->fv_inline ? malloc(ncap * sizeof *v) : realloc(hd->fv, ncap * sizeof *v);
        if (!v)
            return -1;
        if (hd->fv == hd->fv_inline)
            memcpy(v, hd->fv_inline, sizeof hd->fv_inline);
        hd->fv = v;
        hd->capf = ncap;
    }
    h2_field *f = &hd->fv[hd->nf];
    f->name = hd->used;
    f->nlen = (uint32_t)nl;
    f->value = f->name + (uint32_t)nl + 1;
    f->vlen = (uint32_t)vl;
    /* name NUL value NUL, in one reservation (every field of every request) */
    char *p = head_reserve(hd, nl + vl + 2);
    if (!p)
        return -1;
    memcpy(p, name, nl);
    p[nl] = '\0';
    if (vl)
        memcpy(p + nl + 1, value, vl);
    p[nl + 1 + vl] = '\0';
    hd->used += (uint32_t)(nl + vl + 2);
    if (slot >= 0)
        hd->pseudo[slot] = (int)hd->nf;
    hd->nf++;
    return 0;
}

/* The scope's headers: regular fields in order, cookies joined with "; "
 * (RFC 9113 8.2.3), :authority as host (replacing one the client sent). */
static int build_headers(const h2_head *hd, h2_request *r)
{
    pagi_header *hv = r->headers;
    size_t k = 0;
    int have_auth = hd->pseudo[H2_P_AUTHORITY] >= 0;
    if (have_auth) {
        const h2_field *a = &hd->fv[hd->pseudo[H2_P_AUTHORITY]];
        hv[k].name = (pagi_str){"host", 4};
        hv[k].value = (pagi_str){fvalue(hd, a), a->vlen};
        k++;
    }
    size_t cookie_at = SIZE_MAX;
    for (size_t i = 0; i < hd->nf; i++) {
        const h2_field *f = &hd->fv[i];
        const char *nm = fname(hd, f);
        if (f->nlen && nm[0] == ':')
            continue;
        if (have_auth && f->nlen == 4 && !memcmp(nm, "host", 4))
            continue;
        if (f->nlen == 6 && !memcmp(nm, "accept", 6) &&
            strcasestr(fvalue(hd, f), "text/event-stream"))
            r->event_stream = 1;
        if (f->nlen == 6 && !memcmp(nm, "cookie", 6)) {
            if (buf_size(&r->cookies) && buf_append(&r->cookies, "; ", 2) < 0)
                goto oom;
            if (buf_append(&r->cookies, fvalue(hd, f), f->vlen) < 0)
                goto oom;
            if (cookie_at != SIZE_MAX)
                continue;
            cookie_at = k;
        }
        hv[k].name = (pagi_str){nm, f->nlen};
        hv[k].value = (pagi_str){fvalue(hd, f), f->vlen};
        k++;
    }
    if (cookie_at != SIZE_MAX) /* empty cookies leave the buffer unallocated */
        hv[cookie_at].value = buf_size(&r->cookies)
                                  ? (pagi_str){buf_head(&r->cookies), buf_size(&r->cookies)}
                                  : (pagi_str){"", 0};
    r->header_count = k;
    return 0;
oom:
    return -1;
}

int h2_head_request(const h2_head *hd, h2_request *r)
{
    memset(r, 0, offsetof(h2_request, headers_inline));
    if (hd->refuse)
        return hd->refuse;
    if (hd->pseudo[H2_P_METHOD] < 0)
        return 400;
    r->method = fvalue(hd, &hd->fv[hd->pseudo[H2_P_METHOD]]);
    if (!strcmp(r->method, "CONNECT")) {
        /* Only RFC 8441's extended CONNECT for a websocket; a plain CONNECT
         * (a tunnel) or another :protocol is not something pagid serves. */
        if (hd->pseudo[H2_P_PROTOCOL] < 0 ||
            strcasecmp(fvalue(hd, &hd->fv[hd->pseudo[H2_P_PROTOCOL]]), "websocket"))
            return 501;
        if (hd->pseudo[H2_P_SCHEME] < 0 || hd->pseudo[H2_P_AUTHORITY] < 0)
            return 400;
        r->websocket = 1;
    } else if (hd->pseudo[H2_P_PROTOCOL] >= 0) {
        return 400; /* RFC 8441 4: :protocol only with CONNECT */
    }
    if (hd->pseudo[H2_P_PATH] < 0)
        return 400;
    const h2_field *pf = &hd->fv[hd->pseudo[H2_P_PATH]];
    const char *target = fvalue(hd, pf);
    const char *qm = memchr(target, '?', pf->vlen);
    size_t rawlen = qm ? (size_t)(qm - target) : pf->vlen;
    /* The scope's header array and the decoded path: in r itself, or
     * when either is too large one block, the array then the path. */
    if (hd->nf + 1 <= H2_REQUEST_INLINE_FIELDS && rawlen + 1 <= H2_REQUEST_INLINE_PATH) {
        r->headers = r->headers_inline;
        r->path_mem = r->path_inline;
    } else {
        size_t hbytes = (hd->nf + 1) * sizeof(pagi_header);
        if (!(r->block = malloc(hbytes + rawlen + 1)))
            return 500;
        r->headers = r->block;
        r->path_mem = (char *)r->block + hbytes;
    }
    size_t plen = h1_percent_decode(r->path_mem, target, rawlen);
    r->path_mem[plen] = 0;
    if (memchr(r->path_mem, 0, plen))
        return 400; /* a decoded NUL would cut the path short as a C string */
    r->path = (pagi_str){r->path_mem, plen};
    r->raw_path = (pagi_str){target, rawlen};
    r->query = (pagi_str){qm ? qm + 1 : "", qm ? pf->vlen - rawlen - 1 : 0};
    if (hd->pseudo[H2_P_SCHEME] >= 0) {
        const char *sv = fvalue(hd, &hd->fv[hd->pseudo[H2_P_SCHEME]]);
        if (!strcmp(sv, "https") || !strcmp(sv, "http"))
            r->scheme = sv;
    }
    if (build_headers(hd, r) < 0)
        return 500;
    return 0;
}

void h2_request_free(h2_request *r)
{
    free(r->block);
    r->block = NULL;
    r->headers = NULL;
    r->path_mem = NULL;
    buf_free(&r->cookies);
}

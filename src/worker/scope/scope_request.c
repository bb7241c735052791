/*
 * scope_request.c - a scope's private copy of its request (method, path,
 * headers, ...): every string in one block, which the scope owns until
 * its shell goes back to the pool. Blocks of ordinary requests are
 * recycled through a short per-worker free list.
 */
#include "scope_internal.h"

#include <stdlib.h>
#include <string.h>

#include "worker/core/tls_info.h"

/* A copy up to this size takes a block of exactly this size, and a
 * released one waits for the next scope, at most REQ_BLOCKS_KEPT of them
 * (128 KiB a worker; the scope pool keeps as many released shells): a busy
 * HTTP/2 worker makes and releases scopes by the hundred a loop turn, more
 * than glibc's cache of seven blocks a size keeps, so malloc and free took
 * their slow paths. Larger copies are allocated to size. AddressSanitizer
 * sees every block's use after free. */
#define REQ_BLOCK_SIZE 512
#if defined(__SANITIZE_ADDRESS__)
#define REQ_BLOCKS_KEPT 0
#else
#define REQ_BLOCKS_KEPT 256
#endif

typedef struct req_block_free {
    struct req_block_free *next;
} req_block_free;

static char *block_get(worker_ctx *w)
{
    req_block_free *b = w->req_blocks;
    if (!b)
        return malloc(REQ_BLOCK_SIZE);
    w->req_blocks = b->next;
    w->n_req_blocks--;
    return (char *)b;
}

static size_t str_room(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static char *copy_str(char **p, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*p, s, n);
    char *r = *p;
    *p += n;
    return r;
}

static pagi_str copy_bytes(char **p, pagi_str s)
{
    pagi_str r = {*p, s.len};
    if (s.len)
        memcpy(*p, s.ptr, s.len);
    (*p)[s.len] = '\0';
    *p += s.len + 1;
    return r;
}

int scope_copy_request(pagi_scope *s, const scope_request *req)
{
    size_t need = str_room(req->method) + str_room(req->http_version) + str_room(req->scheme) +
                  str_room(req->client_host) + str_room(req->server_host) + req->path.len +
                  req->raw_path.len + req->query.len + 3 + sizeof(pagi_header) * req->header_count +
                  sizeof(pagi_str) * req->subprotocol_count;
    for (size_t i = 0; i < req->header_count; i++)
        need += req->headers[i].name.len + req->headers[i].value.len + 2;
    for (size_t i = 0; i < req->subprotocol_count; i++)
        need += req->subprotocols[i].len + 1;
    char *block = need <= REQ_BLOCK_SIZE ? block_get(s->w) : malloc(need);
    if (!block)
        return -1;
    s->req_block_pooled = need <= REQ_BLOCK_SIZE;
    /* The arrays first, so they are suitably aligned; the bytes follow. */
    pagi_header *hv = (pagi_header *)block;
    pagi_str *sv = (pagi_str *)(hv + req->header_count);
    char *p = (char *)(sv + req->subprotocol_count);
    for (size_t i = 0; i < req->header_count; i++) {
        hv[i].name = copy_bytes(&p, req->headers[i].name);
        hv[i].value = copy_bytes(&p, req->headers[i].value);
    }
    for (size_t i = 0; i < req->subprotocol_count; i++)
        sv[i] = copy_bytes(&p, req->subprotocols[i]);
    s->req.subprotocols = sv;
    s->req.subprotocol_count = req->subprotocol_count;
    s->req.extensions = req->extensions;
    s->req.headers = hv;
    s->req.header_count = req->header_count;
    s->req.method = copy_str(&p, req->method);
    s->req.http_version = copy_str(&p, req->http_version);
    s->req.scheme = copy_str(&p, req->scheme);
    s->req.client_host = copy_str(&p, req->client_host);
    s->req.server_host = copy_str(&p, req->server_host);
    s->req.client_port = req->client_port;
    s->req.server_port = req->server_port;
    s->req.path = copy_bytes(&p, req->path);
    s->req.raw_path = copy_bytes(&p, req->raw_path);
    s->req.query = copy_bytes(&p, req->query);
    s->req_block = block;
    /* Shared with the connection: the facts are made once, on the first ask. */
    s->req.tls = req->tls ? tls_info_ref(req->tls) : NULL;
    return 0;
}

void scope_request_free(pagi_scope *s)
{
    worker_ctx *w = s->w;
    char *block = s->req_block;
    if (!block)
        return;
    s->req_block = NULL;
    if (s->req_block_pooled && w->n_req_blocks + 1 <= REQ_BLOCKS_KEPT) { /* 0 under ASan */
        req_block_free *b = (req_block_free *)(void *)block;
        b->next = w->req_blocks;
        w->req_blocks = b;
        w->n_req_blocks++;
        return;
    }
    free(block);
}

void scope_request_blocks_release(worker_ctx *w)
{
    while (w->req_blocks) {
        req_block_free *b = w->req_blocks;
        w->req_blocks = b->next;
        free(b);
    }
    w->n_req_blocks = 0;
}

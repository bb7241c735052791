/*
 * listeners_overlap.c - listen entries (status.listen among them) that
 * would share a socket address once resolved. With SO_REUSEPORT both would
 * bind and split connections between them: status.listen `localhost:P`
 * beside `127.0.0.1:P` answered metrics on the app's port. Addresses are
 * sorted, so the check stays O(n log n) in the number of entries.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "listeners.h"

/* One resolved address of entry idx; for unix sockets, path is its file. */
typedef struct bound {
    size_t idx;
    int family; /* AF_INET, AF_INET6 or AF_UNIX */
    int port;
    unsigned char addr[16]; /* network order; all zero = the wildcard */
    char *path;             /* AF_UNIX: the directory resolved, owned */
} bound;

static int by_address(const void *x, const void *y)
{
    const bound *a = x, *b = y;
    if (a->family != b->family)
        return a->family < b->family ? -1 : 1;
    if (a->family == AF_UNIX)
        return strcmp(a->path, b->path);
    if (a->port != b->port)
        return a->port < b->port ? -1 : 1;
    int c = memcmp(a->addr, b->addr, sizeof a->addr);
    if (c)
        return c;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int is_wildcard(const bound *b)
{
    static const unsigned char zero[16];
    return b->family != AF_UNIX && memcmp(b->addr, zero, sizeof zero) == 0;
}

static const char *text_of(const bound *b, char *out, size_t len)
{
    char a[INET6_ADDRSTRLEN];
    if (b->family == AF_UNIX) {
        snprintf(out, len, "%s", b->path);
        return out;
    }
    inet_ntop(b->family, b->addr, a, sizeof a);
    snprintf(out, len, b->family == AF_INET6 ? "[%s]:%d" : "%s:%d", a, b->port);
    return out;
}

/* " (ADDRESS)" when the entry's spec does not say it as it is, else "". */
static const char *resolved(const pagid_listen *l, const bound *b, char *out, size_t len)
{
    char text[PATH_MAX + 16];
    text_of(b, text, sizeof text);
    const char *spec = l->kind == LISTEN_UNIX ? l->path : l->spec;
    if (!strcmp(spec, text))
        return "";
    snprintf(out, len, " (%s)", text);
    return out;
}

/* A unix path with its directory resolved (the file may not exist yet), so
 * "unix:/run/x.sock" and "unix:/run/./x.sock" or a linked directory match. */
static char *unix_key(const char *path)
{
    char *copy = strdup(path), *copy2 = strdup(path), dir[PATH_MAX], *out = NULL;
    if (copy && copy2 && realpath(dirname(copy), dir)) {
        const char *base = basename(copy2);
        size_t n = strlen(dir) + strlen(base) + 2;
        if ((out = malloc(n)))
            snprintf(out, n, "%s/%s", strcmp(dir, "/") ? dir : "", base);
    } else if (copy) {
        out = strdup(path);
    }
    free(copy);
    free(copy2);
    return out;
}

static int push(bound **v, size_t *n, size_t *cap, bound b)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        bound *grown = realloc(*v, nc * sizeof *grown);
        if (!grown)
            return -1;
        *v = grown;
        *cap = nc;
    }
    (*v)[(*n)++] = b;
    return 0;
}

/* Every address of every entry; entries that do not resolve are skipped
 * (listeners_open and pagid -t report them). -1 when out of memory. */
static int collect(const pagid_config *c, bound **v, size_t *n)
{
    size_t cap = 0;
    for (size_t i = 0; i < c->n_listens; i++) {
        const pagid_listen *l = &c->listens[i];
        if (l->kind == LISTEN_UNIX) {
            bound b = {.idx = i, .family = AF_UNIX, .path = unix_key(l->path)};
            if (!b.path || push(v, n, &cap, b) < 0) {
                free(b.path);
                return -1;
            }
            continue;
        }
        struct addrinfo *res = NULL;
        if (listeners_resolve(l, &res) != 0)
            continue;
        for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            bound b = {.idx = i, .family = ai->ai_family, .port = l->port};
            if (ai->ai_family == AF_INET)
                memcpy(b.addr, &((const struct sockaddr_in *)(const void *)ai->ai_addr)->sin_addr,
                       4);
            else if (ai->ai_family == AF_INET6)
                memcpy(b.addr, &((const struct sockaddr_in6 *)(const void *)ai->ai_addr)->sin6_addr,
                       16);
            else
                continue;
            if (push(v, n, &cap, b) < 0) {
                freeaddrinfo(res);
                return -1;
            }
        }
        freeaddrinfo(res);
    }
    return 0;
}

static const char *entry_name(const pagid_listen *l)
{
    return l->status ? "status.listen" : "listen address";
}

/* "FILE:LINE:COLUMN" of an entry, or where else it came from. */
static const char *where(const pagid_config *c, const pagid_listen *l, char *out, size_t len)
{
    const char *file = l->pos.file ? l->pos.file : c->source;
    if (file && l->pos.line)
        snprintf(out, len, "%s:%u:%u", file, l->pos.line, l->pos.col);
    else
        snprintf(out, len, "the command line");
    return out;
}

/* Entry later (of a and b) overlaps the earlier one: report it once. */
static int report(const pagid_config *c, const bound *a, const bound *b, unsigned char *reported,
                  FILE *err)
{
    const bound *first = a->idx < b->idx ? a : b, *second = a->idx < b->idx ? b : a;
    if (reported[second->idx])
        return 0;
    reported[second->idx] = 1;
    const pagid_listen *l1 = &c->listens[first->idx], *l2 = &c->listens[second->idx];
    char t1[PATH_MAX + 32], t2[PATH_MAX + 32], at[PATH_MAX + 64];
    const char *why = l1->status != l2->status
                          ? "the metrics would be answered on the app's address and app requests "
                            "on the metrics'"
                      : first->family == AF_UNIX ? "one socket file cannot be two listeners"
                                                 : "both would be bound and split its connections";
    config_report(c, l2->pos, err, "%s '%s'%s overlaps %s '%s'%s at %s: %s", entry_name(l2),
                  l2->spec, resolved(l2, second, t2, sizeof t2), entry_name(l1), l1->spec,
                  resolved(l1, first, t1, sizeof t1), where(c, l1, at, sizeof at), why);
    return 1;
}

int listeners_check_overlap(const pagid_config *c, FILE *err)
{
    bound *v = NULL;
    size_t n = 0;
    int errors = 0;
    unsigned char *reported = calloc(c->n_listens ? c->n_listens : 1, 1);
    if (!reported || collect(c, &v, &n) < 0) {
        fprintf(err, "pagid: out of memory\n");
        errors = 1;
        goto out;
    }
    if (n > 1) /* qsort wants a non-null array even for none */
        qsort(v, n, sizeof *v, by_address);
    /* A group: one family and port (unix: one path). The wildcard sorts
     * first in it and overlaps every other address of the group; equal
     * addresses are neighbours. One entry may resolve to an address twice
     * (/etc/hosts): that is not an overlap. */
    for (size_t g = 0; g < n;) {
        size_t end = g + 1;
        while (
            end < n && v[end].family == v[g].family &&
            (v[g].family == AF_UNIX ? !strcmp(v[end].path, v[g].path) : v[end].port == v[g].port))
            end++;
        for (size_t k = g + 1; k < end; k++) {
            const bound *other = is_wildcard(&v[g]) ? &v[g] : &v[k - 1];
            if (other->idx != v[k].idx && (is_wildcard(&v[g]) || v[g].family == AF_UNIX ||
                                           !memcmp(v[k].addr, v[k - 1].addr, sizeof v[k].addr)))
                errors += report(c, other, &v[k], reported, err);
        }
        g = end;
    }
out:
    for (size_t i = 0; i < n; i++)
        free(v[i].path);
    free(v);
    free(reported);
    return errors;
}

/*
 * config_listen.c - listen addresses in the configuration model: parsing
 * HOST:PORT, [V6]:PORT and unix:PATH specs, the listen list (duplicates
 * refused), and a listener's TLS certificates.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "config.h"

/* Digits only, 1..65535. */
static int parse_port(const char *s, int *out)
{
    if (!*s)
        return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p) || p - s >= 5)
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    *out = (int)v;
    return 0;
}

/* Names are resolved at bind time; here only reject what can never resolve. */
static int valid_hostname(const char *h, size_t len)
{
    if (len == 0 || len > 253)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)h[i];
        if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_')
            return 0;
    }
    return 1;
}

/*
 * Digits and dots only can never be a name (no top-level domain is
 * numeric), so it must be an IPv4 address: "300.1.2.3" is a typo to report
 * now, not a name for the resolver to fail on (or, worse, to look up).
 * inet_aton's forms are accepted, as getaddrinfo accepts them.
 */
static int numeric_host_ok(const char *h, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)h[i]) && h[i] != '.')
            return 1; /* a name: resolved when pagid starts (or by pagid -t) */
    char tmp[16];
    struct in_addr a;
    if (len >= sizeof tmp)
        return 0;
    memcpy(tmp, h, len);
    tmp[len] = '\0';
    return inet_aton(tmp, &a) != 0;
}

pagid_tls *config_tls_new(void)
{
    pagid_tls *t = calloc(1, sizeof *t);
    if (t) {
        t->session_tickets = 1;
        t->verify_depth = -1;
    }
    return t;
}

int config_tls_add_cert(pagid_tls *t, const char *cert, const char *key, pagid_pos pos)
{
    pagid_tls_cert *v = realloc(t->certs, (t->n_certs + 1) * sizeof *v);
    if (!v)
        return -1;
    t->certs = v;
    pagid_tls_cert *e = &v[t->n_certs];
    *e = (pagid_tls_cert){.cert = strdup(cert), .key = strdup(key), .pos = pos, .key_pos = pos};
    if (!e->cert || !e->key) {
        free(e->cert);
        free(e->key);
        return -1;
    }
    t->n_certs++;
    return 0;
}

void config_tls_free(pagid_tls *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_certs; i++) {
        free(t->certs[i].cert);
        free(t->certs[i].key);
        free(t->certs[i].ocsp);
    }
    free(t->certs);
    free(t->protocols);
    free(t->ciphers);
    free(t->ciphersuites);
    free(t->groups);
    free(t->client_ca);
    free(t->client_crl);
    for (size_t i = 0; i < t->n_ticket_keys; i++)
        free(t->ticket_keys[i]);
    free(t->ticket_keys);
    free(t);
}

void config_listen_free(pagid_listen *l)
{
    config_tls_free(l->tls);
    free(l->spec);
    free(l->host);
    free(l->path);
    memset(l, 0, sizeof *l);
}

static int parse_unix(const char *spec, pagid_listen *out, const char **msg)
{
    const char *path = spec + 5;
    if (*path != '/') {
        *msg = "unix socket path must be absolute (unix:/PATH)";
        return -1;
    }
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        *msg = "unix socket path is too long";
        return -1;
    }
    out->kind = LISTEN_UNIX;
    out->spec = strdup(spec);
    out->path = strdup(path);
    if (!out->spec || !out->path) {
        config_listen_free(out);
        *msg = "out of memory";
        return -1;
    }
    return 0;
}

int config_parse_listen(const char *spec, pagid_listen *out, const char **msg)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) {
        *msg = "empty address";
        return -1;
    }
    if (strncmp(spec, "unix:", 5) == 0)
        return parse_unix(spec, out, msg);

    const char *host = NULL, *port;
    size_t host_len = 0;
    if (*spec == '[') {
        const char *rb = strchr(spec, ']');
        if (!rb) {
            *msg = "unbalanced '[' (use [ADDR]:PORT)";
            return -1;
        }
        host = spec + 1;
        host_len = (size_t)(rb - host);
        char tmp[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        if (host_len == 0 || host_len >= sizeof tmp) {
            *msg = "invalid IPv6 address";
            return -1;
        }
        memcpy(tmp, host, host_len);
        tmp[host_len] = '\0';
        if (inet_pton(AF_INET6, tmp, &a6) != 1) {
            *msg = "invalid IPv6 address";
            return -1;
        }
        if (rb[1] != ':') {
            *msg = rb[1] ? "expected ':' after ']' (use [ADDR]:PORT)" : "missing port";
            return -1;
        }
        port = rb + 2;
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon) {
            /* A bare port means every address, like nginx's "listen 80". */
            port = spec;
            if (strspn(spec, "0123456789") != strlen(spec)) {
                *msg = "missing port (use HOST:PORT)";
                return -1;
            }
        } else {
            host = spec;
            host_len = (size_t)(colon - spec);
            port = colon + 1;
            if (memchr(host, ']', host_len)) {
                *msg = "unbalanced ']'";
                return -1;
            }
            if (memchr(host, ':', host_len)) {
                *msg = "IPv6 addresses need brackets ([ADDR]:PORT)";
                return -1;
            }
            if (host_len == 0 || (host_len == 1 && *host == '*')) {
                host = NULL;
            } else if (!valid_hostname(host, host_len)) {
                *msg = "invalid host name";
                return -1;
            } else if (!numeric_host_ok(host, host_len)) {
                *msg = "invalid IPv4 address";
                return -1;
            }
        }
    }
    if (!*port) {
        *msg = "missing port";
        return -1;
    }
    if (parse_port(port, &out->port) < 0) {
        *msg = "invalid port (expected 1..65535)";
        return -1;
    }
    out->kind = LISTEN_TCP;
    out->spec = strdup(spec);
    if (host)
        out->host = strndup(host, host_len);
    if (!out->spec || (host && !out->host)) {
        config_listen_free(out);
        *msg = "out of memory";
        return -1;
    }
    return 0;
}

int config_same_listen(const pagid_listen *a, const pagid_listen *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == LISTEN_UNIX)
        return strcmp(a->path, b->path) == 0;
    if (a->port != b->port)
        return 0;
    if (!a->host || !b->host)
        return !a->host && !b->host;
    return strcmp(a->host, b->host) == 0;
}

int config_add_listen(pagid_config *c, const char *spec, const char **msg)
{
    pagid_listen l;
    if (config_parse_listen(spec, &l, msg) < 0)
        return -1;
    for (size_t i = 0; i < c->n_listens; i++) {
        if (config_same_listen(&c->listens[i], &l)) {
            config_listen_free(&l);
            *msg = "duplicate listen address";
            return -1;
        }
    }
    pagid_listen *v = realloc(c->listens, (c->n_listens + 1) * sizeof *v);
    if (!v) {
        config_listen_free(&l);
        *msg = "out of memory";
        return -1;
    }
    v[c->n_listens++] = l;
    c->listens = v;
    return 0;
}

void config_clear_listens(pagid_config *c)
{
    for (size_t i = 0; i < c->n_listens; i++)
        config_listen_free(&c->listens[i]);
    free(c->listens);
    c->listens = NULL;
    c->n_listens = 0;
}

/*
 * tls_server.h - one TLS listener's server context: certificates and keys
 * read from their files by the master (before the workers exist and drop
 * privileges), protocol and cipher policy, client verification. The master
 * builds one per TLS listener of a generation; its workers inherit it
 * across fork() and only read it.
 */
#ifndef PAGID_TLS_SERVER_H
#define PAGID_TLS_SERVER_H

#include <stdio.h>

#include "config.h"

/* Mozilla's "intermediate" TLS 1.2 list, forward-secret AEAD only, and its
 * TLS 1.3 suites in its order (AES-128-GCM first, as h2o and nginx end up
 * with for the usual client): what a listener offers unless its ciphers /
 * ciphersuites say otherwise (config_dump shows them). The server's order
 * wins, except that a client preferring ChaCha20 (no AES instructions)
 * gets it (SSL_OP_PRIORITIZE_CHACHA). */
#define PAGID_TLS_DEFAULT_CIPHERS                                                                  \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                                   \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                                   \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define PAGID_TLS_DEFAULT_SUITES                                                                   \
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

/* Mozilla's "intermediate" key exchange groups, for TLS 1.2's ECDHE and
 * TLS 1.3's key shares alike: what a listener offers unless its groups or
 * the top-level tls.groups say otherwise. No finite-field group: OpenSSL's
 * own default would accept a ClientHello offering only ffdhe8192, which
 * costs the worker ~140 ms of CPU per handshake (X25519: 1-2 ms). */
#define PAGID_TLS_DEFAULT_GROUPS "X25519:prime256v1:secp384r1"

/** The groups listener t offers (its own, else c's tls.groups, else the
 * default), and where they were written (line 0 for the default). */
static inline const char *tls_server_groups(const pagid_config *c, const pagid_tls *t,
                                            pagid_pos *pos)
{
    if (t->groups) {
        *pos = t->groups_pos;
        return t->groups;
    }
    if (c->tls_groups) {
        *pos = c->tls_groups_pos;
        return c->tls_groups;
    }
    *pos = t->pos;
    return PAGID_TLS_DEFAULT_GROUPS;
}

typedef struct tls_server tls_server;
struct ssl_ctx_st;

/**
 * Build the context for listener l (l->tls set): load and match every
 * certificate and key. Each problem is printed to err as
 * "FILE:LINE:COLUMN: message" (c names the files); returns NULL then.
 */
tls_server *tls_server_new(const pagid_config *c, const pagid_listen *l, FILE *err);
void tls_server_free(tls_server *ts);
/** The OpenSSL context new connections are made from (the default
 * certificate's; SNI may move a handshake to another of ts's). */
struct ssl_ctx_st *tls_server_ssl_ctx(const tls_server *ts);
/** How many SNI contexts ts has: one per set of names (certificates for
 * the same names, with different key types, share one), in the mapping's
 * order. */
size_t tls_server_cert_count(const tls_server *ts);
struct x509_st;
/** Certificate i's leaf (owned by ts), for pagid -t's checks. */
struct x509_st *tls_server_leaf(const tls_server *ts, size_t i);

#endif

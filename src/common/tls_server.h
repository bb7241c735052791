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
/** How many certificates ts serves (the mapping's, in its order). */
size_t tls_server_cert_count(const tls_server *ts);
struct x509_st;
/** Certificate i's leaf (owned by ts), for pagid -t's checks. */
struct x509_st *tls_server_leaf(const tls_server *ts, size_t i);

#endif

/*
 * tls_tickets.h - the session ticket keys of one TLS listener: read from
 * nginx-format files (the first encrypts, all decrypt), or derived per hour
 * from a secret the master makes once, so every worker of every generation
 * computes the same keys without talking to anyone.
 */
#ifndef PAGID_TLS_TICKETS_H
#define PAGID_TLS_TICKETS_H

#include <stdio.h>

#include "config.h"

typedef struct tls_tickets tls_tickets;
struct ssl_ctx_st;

/**
 * The keys of t (t->session_tickets set): its session_ticket_key files, or
 * derived ones. Problems go to err as "FILE:LINE:COLUMN: message"; NULL
 * then. Files are read into this structure only (never copied elsewhere).
 */
tls_tickets *tls_tickets_new(const pagid_config *c, const pagid_tls *t, FILE *err);
/** Bytes of a listener identity (SSL_MAX_SID_CTX_LENGTH). */
#define TLS_TICKET_ID_LEN 32
/**
 * Name the listener tk belongs to (its session ID context): derived keys
 * then depend on it, so a ticket made on one listener (or on the same one
 * before its certificates or client CAs changed) is not even decrypted on
 * another. Keys from files are the operator's and stay as they are (the
 * session ID context still refuses such a ticket). 0 or -1.
 */
int tls_tickets_bind(tls_tickets *tk, const unsigned char id[TLS_TICKET_ID_LEN]);
/** Let ctx encrypt and decrypt its tickets with tk (tk outlives ctx). 0 or -1. */
int tls_tickets_attach(tls_tickets *tk, struct ssl_ctx_st *ctx);
/** Wipe and free; NULL is fine. */
void tls_tickets_free(tls_tickets *tk);

/** Seconds a derived key encrypts; it decrypts for as long again. */
#define TLS_TICKET_ROTATE_SECONDS 3600

/** For tests: the clock derived keys follow (NULL: time(NULL) again). */
void tls_tickets_set_clock(long long (*now)(void));

#endif

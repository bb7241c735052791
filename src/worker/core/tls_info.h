/*
 * tls_info.h - the PAGI tls extension's facts about one TLS connection
 * (pagi_tls_info: certificates as PEM, the client's subject, version,
 * cipher), made on the first ask and shared by reference count between the
 * connection and every scope it carried, so a scope that outlives its
 * connection still answers.
 */
#ifndef PAGID_TLS_INFO_H
#define PAGID_TLS_INFO_H

#include <pagi/pagi.h>

struct ssl_st;
typedef struct tls_info tls_info;

/**
 * A holder for the session ssl (borrowed: the connection's, valid until
 * tls_info_conn_gone), with one reference, the connection's. Nothing is
 * read from ssl yet. NULL when out of memory.
 */
tls_info *tls_info_new(struct ssl_st *ssl);
tls_info *tls_info_ref(tls_info *i);
/** Drop a reference (NULL is ignored); the last frees the facts. */
void tls_info_unref(tls_info *i);
/**
 * The facts, made from the session on the first call (PEM conversions:
 * most requests never ask). NULL when out of memory, or when the
 * connection ended before anyone asked while nobody else held it.
 */
const pagi_tls_info *tls_info_get(tls_info *i);
/**
 * The connection is about to free its session (NULL is ignored): the facts
 * are made now if a scope still holds the holder and nobody asked yet, then
 * the session is forgotten and the connection's reference dropped.
 */
void tls_info_conn_gone(tls_info *i);

#endif

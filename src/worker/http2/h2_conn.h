/*
 * h2_conn.h - HTTP/2 as a connection protocol: what the rest of the worker
 * needs to offer a connection to it (h2_proto as the connection's
 * alt_proto claims it after ALPN h2, or at an h2c preface on a listener
 * that allows prior knowledge).
 */
#ifndef PAGID_H2_CONN_H
#define PAGID_H2_CONN_H

typedef struct conn conn;
struct conn_proto;

/** HTTP/2 (RFC 9113) through nghttp2's framing; streams are PAGI scopes.
 *  As a connection's alt_proto it claims it by ALPN or the h2c preface. */
extern const struct conn_proto h2_proto;

/**
 * A connection that has served nothing yet speaks HTTP/2 from now on: its
 * HTTP/1 state is released and the session made. 0, or -1 when out of
 * memory (the caller closes it).
 */
int h2_conn_start(conn *c);

#endif

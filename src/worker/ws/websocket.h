/*
 * websocket.h - WebSocket (RFC 6455) on a connection: the opening handshake
 * found by the HTTP/1.1 parser, the websocket scope, and the connection
 * protocol that takes over after the 101 (frames, close handshake,
 * keepalive, limits, permessage-deflate).
 */
#ifndef PAGID_WEBSOCKET_H
#define PAGID_WEBSOCKET_H

#include "worker/http1/http1_parser.h"
#include "worker/scope/scope.h"

typedef struct conn conn;
struct conn_proto;

/**
 * h1_on_request's branch for `Upgrade: websocket`. Validates the handshake
 * before any scope exists (answering 400, or 426 for a version other than
 * 13, itself); otherwise creates the websocket scope on c and makes c speak
 * ws_proto. base carries the request facts h1_on_request gathered.
 * Returns 0, or -1 when out of memory (the parse then fails).
 */
int ws_on_upgrade_request(conn *c, const h1_request *req, const scope_request *base);

/** conn_close: release the connection's side of its websocket (h1_of(c)->ws; idempotent). */
void ws_conn_free(conn *c);

/** The connection protocol of a WebSocket, from the upgrade request on. */
extern const struct conn_proto ws_proto;

#endif

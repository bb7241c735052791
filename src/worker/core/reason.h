/*
 * reason.h - the spec's disconnect reason words, interned. A reason travels
 * as one of these pointers from the socket event that caused it to the app
 * (h2o's error strings), so comparing reasons is comparing pointers.
 */
#ifndef PAGID_REASON_H
#define PAGID_REASON_H

extern const char reason_client_closed[];
extern const char reason_client_timeout[];
extern const char reason_idle_timeout[];
extern const char reason_keepalive_timeout[];
extern const char reason_write_timeout[];
extern const char reason_write_error[];
extern const char reason_read_error[];
extern const char reason_protocol_error[];
extern const char reason_server_shutdown[];
extern const char reason_server_error[];
extern const char reason_body_too_large[];
extern const char reason_queue_overflow[];
/* pagid's own (the spec allows x- reasons): the app had not started its
 * response within timeouts.response, and the server answered 504 for it. */
extern const char reason_response_timeout[];

#endif

/*
 * tls_conn.h - the TLS layer of one connection: the handshake, and reading
 * and writing through OpenSSL on the connection's non-blocking socket. It
 * speaks the socket calls' language (bytes, or -1 with errno EAGAIN), so
 * conn.c and outq.c treat a TLS connection like a plain one.
 */
#ifndef PAGID_TLS_CONN_H
#define PAGID_TLS_CONN_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct tls_server;
typedef struct tls_conn tls_conn;

/** How a handshake step ended. */
typedef enum tls_step {
    TLS_STEP_DONE,       /* established */
    TLS_STEP_WANT_READ,  /* wait until the socket is readable */
    TLS_STEP_WANT_WRITE, /* wait until the socket is writable */
    TLS_STEP_EOF,        /* the peer closed or reset the connection */
    TLS_STEP_FAILED,     /* a TLS error (bad record, no shared cipher, a rejected certificate) */
    TLS_STEP_PLAIN_HTTP  /* the first bytes were a cleartext HTTP request: nothing was sent */
} tls_step;

/** A TLS session on fd (not owned) from ts; NULL when out of memory. */
tls_conn *tls_conn_new(const struct tls_server *ts, int fd);
void tls_conn_free(tls_conn *t);
tls_step tls_conn_handshake(tls_conn *t);
/** Why the handshake failed, for a debug line ("no shared cipher"). */
const char *tls_conn_failure(const tls_conn *t);
/** 1 when the handshake failed because the client's ALPN offered no protocol
 * the listener speaks (it was sent no_application_protocol). */
int tls_conn_no_protocol(const tls_conn *t);

/**
 * read(2)'s contract: bytes, 0 at the end of the stream (close_notify or
 * the peer's FIN), -1 with errno (EAGAIN: nothing now; ECONNRESET; EPROTO:
 * a TLS error).
 */
ssize_t tls_conn_read(tls_conn *t, void *p, size_t n);
/** writev(2)'s contract, through TLS records (up to four and a small tail
 * per write(2)); bytes count as written once their records went whole. A
 * retry after EAGAIN, or after a short count, must offer at least the same
 * bytes first (the output queue does). */
ssize_t tls_conn_writev(tls_conn *t, const struct iovec *iov, int cnt);
/** sendfile(2)'s contract: kernel TLS when the kernel has it, else read
 * and encrypted in user space. */
ssize_t tls_conn_sendfile(tls_conn *t, int fd, off_t *offset, size_t len);
/** The last call blocked on the other direction (a read that must write). */
int tls_conn_wants_write(const tls_conn *t);
/** Decrypted bytes wait inside OpenSSL: a read returns data at once. */
int tls_conn_has_pending(const tls_conn *t);
/**
 * OpenSSL holds bytes read from the socket (it reads ahead): whole records,
 * which make the socket no more readable, or part of one. A read loop that
 * ended on EAGAIN leaves at most part of one; any other end may leave whole
 * ones, and the connection must read again without waiting for the socket.
 */
int tls_conn_has_buffered(const tls_conn *t);
/** The negotiated protocol ("TLSv1.3") and cipher (OpenSSL's name), for
 * the access log; the cipher is NULL before the handshake ended. Static
 * strings owned by OpenSSL. */
const char *tls_conn_version(const tls_conn *t);
const char *tls_conn_cipher(const tls_conn *t);
/* 1 when the handshake resumed a session (a ticket) rather than a full one. */
int tls_conn_session_reused(const tls_conn *t);
/** 1 when ALPN chose h2 in the handshake. */
int tls_conn_alpn_h2(const tls_conn *t);
/** Send close_notify once, without waiting for the peer's; nothing after a
 * fatal error or before the handshake finished. */
void tls_conn_close_notify(tls_conn *t);

struct tls_info;
/**
 * The PAGI tls extension's holder of this established session (tls_info.h),
 * made at the first call, one per connection: the caller takes its own
 * reference (tls_info_ref) to keep it past the connection. NULL when out of
 * memory.
 */
struct tls_info *tls_conn_info(tls_conn *t);

#endif

/*
 * tls_server.c - building a TLS listener's OpenSSL context from its `tls:`
 * mapping: modern defaults (TLS 1.2 and 1.3, forward-secret AEAD ciphers,
 * server preference, no renegotiation, no 0-RTT, no compression), ALPN,
 * client certificates. Nothing here runs per connection.
 */
#include "tls_server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

/* Mozilla's "intermediate" TLS 1.2 list, forward-secret AEAD only; TLS 1.3
 * suites are OpenSSL's defaults (all AEAD). */
#define TLS_DEFAULT_CIPHERS                                                                    \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                              \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                              \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

struct tls_server {
    SSL_CTX *ctx;
};

/* The most recent OpenSSL error as text, or fallback. */
static const char *ssl_error_text(char *out, size_t outlen, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (!e) {
        snprintf(out, outlen, "%s", fallback);
        return out;
    }
    const char *reason = ERR_reason_error_string(e);
    snprintf(out, outlen, "%s", reason ? reason : fallback);
    ERR_clear_error();
    return out;
}

/* ALPN: HTTP/1.1 is the one protocol spoken; a client that offers only
 * others gets no ALPN answer rather than a failed handshake. */
static int tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                           const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* client_auth: optional keeps a connection whose certificate does not
 * verify; the app sees why in client_cert_error. */
static int tls_verify_optional(int preverify_ok, X509_STORE_CTX *x)
{
    (void)preverify_ok;
    (void)x;
    return 1;
}

static int tls_load_cert(const pagid_config *c, SSL_CTX *ctx, const pagid_tls_cert *pc, FILE *err)
{
    char why[160];
    if (SSL_CTX_use_certificate_chain_file(ctx, pc->cert) != 1) {
        config_report(c, pc->pos, err, "cannot load certificate '%s': %s", pc->cert,
                      ssl_error_text(why, sizeof why, "unreadable"));
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, pc->key, SSL_FILETYPE_PEM) != 1) {
        config_report(c, pc->pos, err, "cannot load private key '%s': %s", pc->key,
                      ssl_error_text(why, sizeof why, "unreadable"));
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        config_report(c, pc->pos, err, "private key '%s' does not match certificate '%s'",
                      pc->key, pc->cert);
        ERR_clear_error();
        return -1;
    }
    return 0;
}

static int tls_setup_client_auth(const pagid_config *c, SSL_CTX *ctx, const pagid_tls *t,
                                 FILE *err)
{
    char why[160];
    if (t->client_auth == TLS_CLIENT_NONE)
        return 0;
    if (SSL_CTX_load_verify_locations(ctx, t->client_ca, NULL) != 1) {
        config_report(c, t->pos, err, "cannot load client CA '%s': %s", t->client_ca,
                      ssl_error_text(why, sizeof why, "unreadable"));
        return -1;
    }
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->client_ca);
    if (names)
        SSL_CTX_set_client_CA_list(ctx, names);
    ERR_clear_error();
    if (t->client_auth == TLS_CLIENT_REQUIRE)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    else
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, tls_verify_optional);
    return 0;
}

tls_server *tls_server_new(const pagid_config *c, const pagid_listen *l, FILE *err)
{
    const pagid_tls *t = l->tls;
    tls_server *ts = calloc(1, sizeof *ts);
    if (!ts || !(ts->ctx = SSL_CTX_new(TLS_server_method()))) {
        config_report(c, l->pos, err, "cannot set up TLS for %s: out of memory", l->spec);
        free(ts);
        return NULL;
    }
    SSL_CTX *ctx = ts->ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_ENABLE_KTLS);
    /* Partial writes: the output queue hands over what the socket may take
     * and keeps the rest; moving buffers: a retry may come from another
     * address with the same bytes. Release buffers: an idle connection
     * keeps no 16 KiB record buffers. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    /* Read ahead: a record comes in with one read(2), not one for its
     * header and one for its body. What is read beyond the record stays
     * buffered, which the worker sees through SSL_has_pending. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_max_early_data(ctx, 0);
    SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_select, NULL);
    static const unsigned char sid_ctx[] = "pagid";
    SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof sid_ctx - 1);
    int bad = 0;
    if (SSL_CTX_set_cipher_list(ctx, t->ciphers ? t->ciphers : TLS_DEFAULT_CIPHERS) != 1) {
        config_report(c, t->pos, err, "no usable cipher in '%s'",
                      t->ciphers ? t->ciphers : TLS_DEFAULT_CIPHERS);
        bad = 1;
    }
    if (t->ciphersuites && SSL_CTX_set_ciphersuites(ctx, t->ciphersuites) != 1) {
        config_report(c, t->pos, err, "no usable TLS 1.3 cipher suite in '%s'", t->ciphersuites);
        bad = 1;
    }
    ERR_clear_error();
    if (t->n_certs == 0 || tls_load_cert(c, ctx, &t->certs[0], err) < 0)
        bad = 1;
    if (tls_setup_client_auth(c, ctx, t, err) < 0)
        bad = 1;
    if (bad) {
        tls_server_free(ts);
        return NULL;
    }
    return ts;
}

void tls_server_free(tls_server *ts)
{
    if (!ts)
        return;
    SSL_CTX_free(ts->ctx);
    free(ts);
}

struct ssl_ctx_st *tls_server_ssl_ctx(const tls_server *ts) { return ts->ctx; }

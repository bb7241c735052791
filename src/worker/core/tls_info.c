/*
 * tls_info.c - the PAGI tls extension's facts about a TLS session, read from
 * OpenSSL once per connection on the first ask and kept in one allocation,
 * so they outlive the session for the scopes that still hold them.
 */
#include "tls_info.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct tls_info {
    int refs;
    SSL *ssl;  /* the connection's session until tls_info_conn_gone; NULL after */
    int tried; /* the facts were made (or their making failed) */
    int ok;    /* pub is filled */
    pagi_tls_info pub;
    void *block; /* the chain array and the strings of pub, but a shared server PEM */
};

tls_info *tls_info_new(SSL *ssl)
{
    tls_info *i = calloc(1, sizeof *i);
    if (!i)
        return NULL;
    i->refs = 1;
    i->ssl = ssl;
    return i;
}

tls_info *tls_info_ref(tls_info *i)
{
    i->refs++;
    return i;
}

void tls_info_unref(tls_info *i)
{
    if (!i || --i->refs > 0)
        return;
    free(i->block);
    free(i);
}

/* The texts are written one after another into a memory BIO and their
 * lengths noted; an absent one (no client certificate) is TLS_TEXT_ABSENT. */
#define TLS_TEXT_ABSENT SIZE_MAX

static size_t bio_len(BIO *b)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);
    return n > 0 ? (size_t)n : 0;
}

static int put_pem(BIO *b, X509 *x, size_t *len)
{
    size_t before = bio_len(b);
    if (!x) {
        *len = TLS_TEXT_ABSENT;
        return 0;
    }
    if (PEM_write_bio_X509(b, x) != 1)
        return -1;
    *len = bio_len(b) - before;
    return 0;
}

/* RFC 4514: the most specific RDN first, comma-separated, specials escaped.
 * XN_FLAG_RFC2253 would also escape every non-ASCII byte (\C3\A9): legal,
 * but RFC 4514 lets UTF-8 stand as it is, and an app reads it as text. */
static int put_name(BIO *b, X509 *x, size_t *len)
{
    size_t before = bio_len(b);
    if (!x) {
        *len = TLS_TEXT_ABSENT;
        return 0;
    }
    if (X509_NAME_print_ex(b, X509_get_subject_name(x), 0,
                           XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) < 0)
        return -1;
    *len = bio_len(b) - before;
    return 0;
}

/* Copy the next text out of the BIO's bytes at *src into *dst, NUL-terminated. */
static const char *take_text(const char **src, char **dst, size_t len)
{
    if (len == TLS_TEXT_ABSENT)
        return NULL;
    char *r = *dst;
    memcpy(r, *src, len);
    r[len] = '\0';
    *src += len;
    *dst += len + 1;
    return r;
}

/* The client's certificates, leaf first. On the server side OpenSSL keeps
 * the leaf apart from the rest of the chain the client sent; a chain that
 * does repeat it (another library version) is not counted twice. */
static size_t client_chain(SSL *ssl, X509 *leaf, STACK_OF(X509) **rest, int *skip)
{
    *rest = leaf ? SSL_get_peer_cert_chain(ssl) : NULL;
    int n = *rest ? sk_X509_num(*rest) : 0;
    *skip = n > 0 && X509_cmp(sk_X509_value(*rest, 0), leaf) == 0;
    return leaf ? 1 + (size_t)(n - *skip) : 0;
}

/*
 * The server's own certificates are few and live as long as the worker (the
 * master builds the contexts before fork): each one's PEM is made once per
 * worker and shared by every connection, not copied into each. An entry
 * holds a reference to its certificate, so the pointer it is found by is
 * never another certificate's; reachable until exit, like the contexts.
 * NULL when the table is full (the PEM then goes into the connection's block).
 */
#define TLS_PEM_CACHE 16
static struct {
    X509 *cert;
    char *pem;
} pem_cache[TLS_PEM_CACHE];

static const char *server_pem(X509 *x)
{
    size_t k = 0;
    for (; k < TLS_PEM_CACHE && pem_cache[k].cert; k++)
        if (pem_cache[k].cert == x)
            return pem_cache[k].pem;
    BIO *b = k < TLS_PEM_CACHE ? BIO_new(BIO_s_mem()) : NULL;
    size_t n;
    char *pem = NULL;
    if (b && put_pem(b, x, &n) == 0 && (pem = malloc(n + 1))) {
        char *p;
        BIO_get_mem_data(b, &p);
        memcpy(pem, p, n);
        pem[n] = '\0';
        X509_up_ref(x);
        pem_cache[k].cert = x;
        pem_cache[k].pem = pem;
    }
    if (!pem)
        ERR_clear_error();
    BIO_free(b);
    return pem;
}

static int tls_info_build(tls_info *i)
{
    SSL *ssl = i->ssl;
    X509 *leaf = SSL_get0_peer_certificate(ssl);
    STACK_OF(X509) *rest;
    int skip;
    size_t count = client_chain(ssl, leaf, &rest, &skip);
    X509 *own = SSL_get_certificate(ssl);
    const char *own_pem = own ? server_pem(own) : NULL;
    int rc = -1;
    size_t *lens = NULL;
    BIO *b = NULL;
    char *block = NULL;
    /* The connection's own texts: the server's certificate when it is not
     * shared, the client's chain, the client's name. Without a client
     * certificate there is usually nothing to keep. */
    size_t ntext = count + 2;
    if ((own && !own_pem) || count) {
        lens = malloc(ntext * sizeof *lens);
        b = BIO_new(BIO_s_mem());
        if (!lens || !b)
            goto out;
        if (put_pem(b, own_pem ? NULL : own, &lens[0]) < 0)
            goto out;
        for (size_t k = 0; k < count; k++) {
            X509 *x = k == 0 ? leaf : sk_X509_value(rest, (int)k - 1 + skip);
            if (put_pem(b, x, &lens[1 + k]) < 0)
                goto out;
        }
        if (put_name(b, leaf, &lens[ntext - 1]) < 0)
            goto out;
        size_t bytes = bio_len(b) + ntext; /* every text and its NUL */
        if (!(block = malloc(count * sizeof(char *) + bytes)))
            goto out;
        const char **chain = (const char **)block;
        char *dst = block + count * sizeof(char *);
        const char *src;
        BIO_get_mem_data(b, (char **)&src);
        const char *own_copy = take_text(&src, &dst, lens[0]);
        if (!own_pem)
            own_pem = own_copy;
        for (size_t k = 0; k < count; k++)
            chain[k] = take_text(&src, &dst, lens[1 + k]);
        i->pub.client_cert_chain = count ? chain : NULL;
        i->pub.client_cert_name = take_text(&src, &dst, lens[ntext - 1]);
    }
    i->pub.server_cert = own_pem;
    i->pub.client_cert_count = count;
    long verify = SSL_get_verify_result(ssl);
    /* Only a certificate the client sent can have failed: without one the
     * result is X509_V_OK anyway, but say so plainly. The string is static. */
    i->pub.client_cert_error =
        leaf && verify != X509_V_OK ? X509_verify_cert_error_string(verify) : NULL;
    i->pub.tls_version = SSL_version(ssl);
    const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
    i->pub.cipher_suite = c ? (int)SSL_CIPHER_get_protocol_id(c) : 0;
    i->block = block;
    rc = 0;
out:
    if (rc < 0)
        ERR_clear_error(); /* the connection's next call starts from an empty queue */
    BIO_free(b);
    free(lens);
    return rc;
}

const pagi_tls_info *tls_info_get(tls_info *i)
{
    if (!i->tried && i->ssl) {
        i->tried = 1;
        i->ok = tls_info_build(i) == 0;
    }
    return i->ok ? &i->pub : NULL;
}

void tls_info_conn_gone(tls_info *i)
{
    if (!i)
        return;
    if (i->refs > 1)
        (void)tls_info_get(i);
    i->ssl = NULL;
    tls_info_unref(i);
}

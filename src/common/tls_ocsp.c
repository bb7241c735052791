/*
 * tls_ocsp.c - OCSP stapling from files (see tls_ocsp.h). Each context keeps
 * the responses of its certificates (ex_data, freed with the context); the
 * status callback picks the one of the certificate the handshake chose and
 * stops stapling it once its nextUpdate has passed.
 */
#include "tls_ocsp.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Responses bigger than this are not OCSP responses for one certificate. */
#define OCSP_FILE_MAX (64 * 1024)

typedef struct ocsp_staple {
    X509 *leaf; /* the certificate it is for (a reference) */
    unsigned char *der;
    int len;
    time_t expires; /* its nextUpdate; 0: none given */
} ocsp_staple;

typedef struct ocsp_set {
    ocsp_staple *v;
    size_t n;
} ocsp_set;

static int ex_index = -1;

static void ocsp_set_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                          void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    ocsp_set *set = ptr;
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++) {
        X509_free(set->v[i].leaf);
        OPENSSL_free(set->v[i].der);
    }
    free(set->v);
    free(set);
}

/* Asked only when the client sent status_request; after the certificate
 * was chosen, so SSL_get_certificate is the one to vouch for. */
static int ocsp_status_cb(SSL *s, void *arg)
{
    (void)arg;
    ocsp_set *set = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), ex_index);
    X509 *cur = SSL_get_certificate(s);
    for (size_t i = 0; set && cur && i < set->n; i++) {
        ocsp_staple *e = &set->v[i];
        if (X509_cmp(e->leaf, cur) != 0)
            continue;
        if (e->expires && time(NULL) > e->expires)
            return SSL_TLSEXT_ERR_NOACK; /* stale: better none than a refused one */
        unsigned char *copy = OPENSSL_memdup(e->der, (size_t)e->len);
        if (!copy || SSL_set_tlsext_status_ocsp_resp(s, copy, e->len) != 1) {
            OPENSSL_free(copy);
            return SSL_TLSEXT_ERR_NOACK;
        }
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static unsigned char *read_file(const char *path, int *len, const char **why)
{
    FILE *f = fopen(path, "rbe");
    if (!f) {
        *why = strerror(errno);
        return NULL;
    }
    unsigned char *buf = OPENSSL_malloc(OCSP_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, OCSP_FILE_MAX + 1, f) : 0;
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed || n == 0 || n > OCSP_FILE_MAX) {
        *why = failed ? "unreadable" : n == 0 ? "the file is empty" : "over 64 KiB";
        OPENSSL_free(buf);
        return NULL;
    }
    *len = (int)n;
    return buf;
}

/* The issuer of leaf among ctx's chain of its current certificate. */
static X509 *find_issuer(SSL_CTX *ctx, X509 *leaf)
{
    STACK_OF(X509) *chain = NULL;
    if (SSL_CTX_get0_chain_certs(ctx, &chain) != 1 || !chain)
        return NULL;
    for (int i = 0; i < sk_X509_num(chain); i++)
        if (X509_check_issued(sk_X509_value(chain, i), leaf) == X509_V_OK)
            return sk_X509_value(chain, i);
    return NULL;
}

/* Signed by issuer, or by a responder issuer delegated to (its
 * certificate in the response, with the OCSP signing purpose). */
static int response_verifies(OCSP_BASICRESP *bs, X509 *issuer)
{
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509) *certs = sk_X509_new_null();
    int ok = store && certs && X509_STORE_add_cert(store, issuer) == 1 &&
             sk_X509_push(certs, issuer) > 0;
    if (ok) {
        X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN);
        ok = OCSP_basic_verify(bs, certs, store, 0) == 1;
    }
    sk_X509_free(certs);
    X509_STORE_free(store);
    return ok;
}

static int staple_add(SSL_CTX *ctx, X509 *leaf, unsigned char *der, int len, time_t expires)
{
    ocsp_set *set = SSL_CTX_get_ex_data(ctx, ex_index);
    if (!set) {
        if (!(set = calloc(1, sizeof *set)) || SSL_CTX_set_ex_data(ctx, ex_index, set) != 1) {
            free(set);
            return -1;
        }
        SSL_CTX_set_tlsext_status_cb(ctx, ocsp_status_cb);
    }
    ocsp_staple *v = realloc(set->v, (set->n + 1) * sizeof *v);
    if (!v)
        return -1;
    set->v = v;
    X509_up_ref(leaf);
    v[set->n++] = (ocsp_staple){.leaf = leaf, .der = der, .len = len, .expires = expires};
    return 0;
}

static time_t to_time(const ASN1_GENERALIZEDTIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return timegm(&tm);
}

int tls_ocsp_load(const pagid_config *c, SSL_CTX *ctx, const pagid_tls_cert *pc, FILE *err)
{
    if (ex_index < 0)
        ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, ocsp_set_free);
    if (ex_index < 0)
        return -1;
    const char *why = NULL;
    int len = 0;
    unsigned char *der = read_file(pc->ocsp, &len, &why);
    if (!der) {
        config_report(c, pc->ocsp_pos, err, "cannot read OCSP response '%s': %s", pc->ocsp, why);
        return -1;
    }
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    X509 *issuer = find_issuer(ctx, leaf);
    const unsigned char *p = der;
    OCSP_RESPONSE *resp = d2i_OCSP_RESPONSE(NULL, &p, len);
    OCSP_BASICRESP *bs = resp ? OCSP_response_get1_basic(resp) : NULL;
    OCSP_CERTID *id = issuer ? OCSP_cert_to_id(NULL, leaf, issuer) : NULL;
    int status = -1, reason = 0, rc = -1;
    ASN1_GENERALIZEDTIME *rev = NULL, *thisupd = NULL, *nextupd = NULL;
    if (!resp || p != der + len)
        why = "not a DER OCSP response (openssl ocsp -respout writes one)";
    else if (OCSP_response_status(resp) != OCSP_RESPONSE_STATUS_SUCCESSFUL)
        why = OCSP_response_status_str(OCSP_response_status(resp));
    else if (!bs)
        why = "no basic response in it";
    else if (!issuer)
        why = "the certificate file holds no issuer of the certificate, needed to check it";
    else if (!id || OCSP_resp_find_status(bs, id, &status, &reason, &rev, &thisupd, &nextupd) != 1)
        why = "it is not about this certificate";
    else if (!response_verifies(bs, issuer))
        why = "its signature does not verify against the certificate's issuer";
    else if (status != V_OCSP_CERTSTATUS_GOOD)
        why = status == V_OCSP_CERTSTATUS_REVOKED ? "it says the certificate is revoked"
                                                  : "it says the certificate's status is unknown";
    else if (!OCSP_check_validity(thisupd, nextupd, 300, -1))
        rc = 0; /* out of date: not stapled (preflight_tls.c warns) */
    else if (staple_add(ctx, leaf, der, len, to_time(nextupd)) < 0) {
        why = "out of memory";
    } else {
        der = NULL; /* the context's now */
        rc = 0;
    }
    if (rc < 0)
        config_report(c, pc->ocsp_pos, err, "OCSP response '%s' cannot be stapled: %s", pc->ocsp,
                      why);
    OCSP_CERTID_free(id);
    OCSP_BASICRESP_free(bs);
    OCSP_RESPONSE_free(resp);
    OPENSSL_free(der);
    ERR_clear_error();
    return rc;
}

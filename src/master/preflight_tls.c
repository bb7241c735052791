/*
 * preflight_tls.c - pagid -t for TLS listeners. The contexts are built by
 * tls_server_new exactly as the start builds them (every file loads, every
 * key matches its certificate, the cipher lists are usable); then each
 * certificate file is read once more as a chain to say what OpenSSL would
 * accept but clients would not: a chain out of order, a certificate
 * expired, not yet valid, or expiring soon.
 */
#include "preflight_tls.h"

#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/tls_server.h"

/* Room for the longest chain looked at; a longer one is checked in part. */
#define MAX_CHAIN 16

static void say(const pagid_config *c, pagid_pos pos, FILE *err, int *errors, int is_error,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void say(const pagid_config *c, pagid_pos pos, FILE *err, int *errors, int is_error,
                const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    config_report(c, pos, err, "%s%s", is_error ? "" : "warning: ", msg);
    *errors += is_error;
}

/* "CN=..." of a certificate's subject, for messages. */
static const char *subject_text(X509 *x, char *out, size_t outlen)
{
    X509_NAME *n = X509_get_subject_name(x);
    int i = X509_NAME_get_index_by_NID(n, NID_commonName, -1);
    ASN1_STRING *s = i >= 0 ? X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, i)) : NULL;
    if (s)
        snprintf(out, outlen, "CN=%.*s", ASN1_STRING_length(s),
                 (const char *)ASN1_STRING_get0_data(s));
    else
        X509_NAME_oneline(n, out, (int)outlen);
    return out;
}

/* An ASN1_TIME as "2026-12-31 23:59:59 UTC". */
static const char *time_text(const ASN1_TIME *t, char *out, size_t outlen)
{
    struct tm tm;
    if (ASN1_TIME_to_tm(t, &tm) != 1 || !strftime(out, outlen, "%Y-%m-%d %H:%M:%S UTC", &tm))
        snprintf(out, outlen, "?");
    return out;
}

static void check_dates(const pagid_config *c, const pagid_tls_cert *pc, X509 *x, size_t idx,
                        FILE *err, int *errors, int *fatal)
{
    char who[256], when[64], which[32];
    subject_text(x, who, sizeof who);
    snprintf(which, sizeof which, idx == 0 ? "certificate" : "chain certificate %zu", idx + 1);
    const ASN1_TIME *nb = X509_get0_notBefore(x), *na = X509_get0_notAfter(x);
    if (X509_cmp_current_time(nb) > 0) {
        say(c, pc->pos, err, errors, 1, "%s %s (%s) is not valid before %s", which, pc->cert, who,
            time_text(nb, when, sizeof when));
        *fatal += idx == 0;
        return;
    }
    if (X509_cmp_current_time(na) < 0) {
        say(c, pc->pos, err, errors, 1, "%s %s (%s) expired on %s", which, pc->cert, who,
            time_text(na, when, sizeof when));
        *fatal += idx == 0;
        return;
    }
    int days = 0, secs = 0;
    if (ASN1_TIME_diff(&days, &secs, NULL, na) == 1 && days < PREFLIGHT_TLS_EXPIRY_WARN_DAYS)
        say(c, pc->pos, err, errors, 0, "%s %s (%s) expires on %s (in %d day%s)", which, pc->cert,
            who, time_text(na, when, sizeof when), days, days == 1 ? "" : "s");
}

/* The file as a chain: leaf first, each certificate issued by the next. */
static void check_chain(const pagid_config *c, const pagid_tls_cert *pc, FILE *err, int *errors,
                        int *fatal)
{
    FILE *f = fopen(pc->cert, "re");
    if (!f)
        return; /* tls_server_new said why */
    X509 *chain[MAX_CHAIN];
    size_t n = 0;
    while (n < MAX_CHAIN && (chain[n] = PEM_read_X509(f, NULL, NULL, NULL)))
        n++;
    fclose(f);
    ERR_clear_error();
    for (size_t i = 0; i < n; i++)
        check_dates(c, pc, chain[i], i, err, errors, fatal);
    /* A later certificate issued by the first: the server's certificate is
     * not first, which tls_server_new has said in those words. */
    int leaf_not_first = 0;
    for (size_t k = 1; k < n && !leaf_not_first; k++)
        leaf_not_first = X509_check_issued(chain[0], chain[k]) == X509_V_OK;
    for (size_t i = 0; i + 1 < n && !leaf_not_first; i++) {
        if (X509_check_issued(chain[i + 1], chain[i]) == X509_V_OK)
            continue;
        char who[256], next[256];
        size_t k = 0;
        while (k < n && (k == i || X509_check_issued(chain[k], chain[i]) != X509_V_OK))
            k++;
        subject_text(chain[i], who, sizeof who);
        subject_text(chain[i + 1], next, sizeof next);
        if (k < n)
            say(c, pc->pos, err, errors, 1,
                "certificate chain of %s is out of order: certificate %zu (%s) is followed by %s, "
                "but its issuer is certificate %zu (each certificate must be followed by its "
                "issuer)",
                pc->cert, i + 1, who, next, k + 1);
        else
            say(c, pc->pos, err, errors, 1,
                "certificate chain of %s is broken: certificate %zu (%s) is not issued by the "
                "next one (%s)",
                pc->cert, i + 1, who, next);
        break;
    }
    for (size_t i = 0; i < n; i++)
        X509_free(chain[i]);
}

/* An expired CRL makes OpenSSL refuse every client certificate it covers:
 * said here, since the handshakes then fail only at debug level. */
static void check_crl(const pagid_config *c, const pagid_tls *t, FILE *err, int *errors)
{
    if (!t->client_crl || t->client_auth == TLS_CLIENT_NONE)
        return;
    FILE *f = fopen(t->client_crl, "re");
    if (!f)
        return; /* tls_server_new said why */
    X509_CRL *crl;
    while ((crl = PEM_read_X509_CRL(f, NULL, NULL, NULL))) {
        const ASN1_TIME *next = X509_CRL_get0_nextUpdate(crl);
        if (next && X509_cmp_current_time(next) < 0) {
            char who[256], when[64];
            X509_NAME_oneline(X509_CRL_get_issuer(crl), who, sizeof who);
            say(c, t->client_crl_pos, err, errors, 0,
                "CRL of %s in %s expired on %s: clients with certificates of that CA are refused "
                "until a fresh CRL is loaded (reload)",
                who, t->client_crl, time_text(next, when, sizeof when));
        }
        X509_CRL_free(crl);
    }
    fclose(f);
    ERR_clear_error();
}

/* An OCSP response out of date is not stapled (tls_ocsp.c): said here,
 * since clients that want one then simply get none. */
static void check_ocsp_dates(const pagid_config *c, const pagid_tls_cert *pc, FILE *err,
                             int *errors)
{
    BIO *in = pc->ocsp ? BIO_new_file(pc->ocsp, "rb") : NULL;
    if (!in) {
        ERR_clear_error();
        return; /* none, or tls_server_new said why */
    }
    OCSP_RESPONSE *resp = d2i_OCSP_RESPONSE_bio(in, NULL);
    BIO_free(in);
    OCSP_BASICRESP *bs = resp ? OCSP_response_get1_basic(resp) : NULL;
    OCSP_SINGLERESP *one = bs ? OCSP_resp_get0(bs, 0) : NULL;
    ASN1_GENERALIZEDTIME *thisupd = NULL, *nextupd = NULL;
    char when[64];
    time_t skew = time(NULL) + 300; /* as tls_ocsp.c allows */
    if (one && OCSP_single_get0_status(one, NULL, NULL, &thisupd, &nextupd) >= 0) {
        if (nextupd && X509_cmp_current_time(nextupd) < 0)
            say(c, pc->ocsp_pos, err, errors, 0,
                "OCSP response %s expired on %s: it is not stapled until a fresh one is loaded "
                "(reload)",
                pc->ocsp, time_text(nextupd, when, sizeof when));
        else if (thisupd && X509_cmp_time(thisupd, &skew) > 0)
            say(c, pc->ocsp_pos, err, errors, 0,
                "OCSP response %s is not valid before %s: it is not stapled until then (and a "
                "reload)",
                pc->ocsp, time_text(thisupd, when, sizeof when));
    }
    OCSP_BASICRESP_free(bs);
    OCSP_RESPONSE_free(resp);
    ERR_clear_error();
}

/* A private key anyone may read is a key anyone on the host has. */
static void check_key_mode(const pagid_config *c, const pagid_tls_cert *pc, FILE *err, int *errors)
{
    struct stat st;
    if (stat(pc->key, &st) == 0 && (st.st_mode & S_IROTH))
        say(c, pc->key_pos, err, errors, 0,
            "private key %s is readable by every user (mode 0%03o): chmod o-r it", pc->key,
            (unsigned)(st.st_mode & 0777));
}

int preflight_tls_files(const pagid_config *c, const pagid_listen *l, FILE *err, int *fatal)
{
    int errors = 0, leaf = 0;
    for (size_t i = 0; i < l->tls->n_certs; i++) {
        check_chain(c, &l->tls->certs[i], err, &errors, &leaf);
        check_key_mode(c, &l->tls->certs[i], err, &errors);
        check_ocsp_dates(c, &l->tls->certs[i], err, &errors);
    }
    check_crl(c, l->tls, err, &errors);
    if (fatal)
        *fatal += leaf;
    return errors;
}

int preflight_tls_check(const pagid_config *c, const pagid_listen *l, FILE *err)
{
    /* Each message is an error of its own (the count -t prints). */
    char *text = NULL;
    size_t len = 0;
    FILE *msgs = open_memstream(&text, &len);
    tls_server *ts = tls_server_new(c, l, msgs ? msgs : err);
    int errors = 0;
    if (msgs) {
        fclose(msgs);
        for (size_t i = 0; i < len; i++)
            errors += text[i] == '\n';
        if (len)
            fwrite(text, 1, len, err);
        free(text);
    }
    if (!ts && !errors)
        errors = 1;
    tls_server_free(ts);
    return errors + preflight_tls_files(c, l, err, NULL);
}

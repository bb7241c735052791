/*
 * tls_server.c - building a TLS listener's OpenSSL contexts from its `tls:`
 * mapping: modern defaults (TLS 1.2 and 1.3, forward-secret AEAD ciphers,
 * elliptic-curve key exchange, server preference, no renegotiation, no
 * 0-RTT, no compression), ALPN, client certificates, session tickets. One
 * context per set of names (its certificates, one per key type), all alike
 * but for them; SNI moves a handshake to the one whose names match.
 */
#include "tls_server.h"

#include "tls_ocsp.h"
#include "tls_tickets.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct tls_server {
    SSL_CTX **ctx; /* one per certificate of the mapping; ctx[0] the default */
    size_t n;
    tls_tickets *tickets; /* NULL: session_tickets: false */
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

/* Why a PEM file did not load, in words an operator can act on: the
 * system's reason when it cannot be opened, or the missing block when it
 * holds none of the kind expected (OpenSSL says "system lib", "PEM lib" or
 * "unsupported" then). 1 with why set, or 0 (the file's content is at
 * fault: OpenSSL's reason is the better one). */
static int pem_file_problem(const char *file, const char *kind, const char *const *markers,
                            char *why, size_t whylen)
{
    FILE *f = fopen(file, "re");
    if (!f) {
        int e = errno;
        snprintf(why, whylen, "%s%s", strerror(e),
                 e == EACCES && geteuid() != 0
                     ? " (run pagid -t as the user that starts pagid: it reads certificates and "
                       "keys before it drops privileges)"
                     : "");
        return 1;
    }
    enum { MAX_PEM = 1 << 20 }; /* more is not a certificate or key file */
    char *text = malloc(MAX_PEM);
    size_t got = text ? fread(text, 1, MAX_PEM, f) : 0;
    fclose(f);
    int found = !text; /* out of memory: no better reason than OpenSSL's */
    for (size_t i = 0; text && markers[i] && !found; i++)
        found = memmem(text, got, markers[i], strlen(markers[i])) != NULL;
    if (text)
        OPENSSL_cleanse(text, got);
    free(text);
    if (found)
        return 0;
    snprintf(why, whylen, "no %s block in %s", kind, file);
    return 1;
}

static const char *const cert_markers[] = {"-----BEGIN CERTIFICATE-----",
                                           "-----BEGIN TRUSTED CERTIFICATE-----",
                                           "-----BEGIN X509 CERTIFICATE-----", NULL};
static const char *const key_markers[] = {"PRIVATE KEY-----", NULL};
static const char *const crl_markers[] = {"-----BEGIN X509 CRL-----", NULL};

/* ssl_error_text, unless the file explains it better. */
static const char *load_error_text(const char *file, const char *kind, const char *const *markers,
                                   char *out, size_t outlen, const char *fallback)
{
    if (pem_file_problem(file, kind, markers, out, outlen)) {
        ERR_clear_error();
        return out;
    }
    return ssl_error_text(out, outlen, fallback);
}

/* ALPN: h2 first when the listener speaks HTTP/2 (arg non-NULL), then
 * http/1.1 and http/1.0 (curl --http1.0 offers only that; nginx takes it
 * too, and the HTTP/1 parser serves both). Our order decides among what both
 * offer (SSL_select_next_proto walks the server's list first). OpenSSL calls
 * this only when the client sent ALPN (one that sends none gets HTTP/1.x); a
 * client whose list holds none of ours gets the no_application_protocol
 * alert, as RFC 7301 3.2 says: answering it in HTTP anyway is what
 * cross-protocol attacks (ALPACA) count on, a TLS endpoint taken for another
 * protocol's server. */
static int tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                           const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    static const unsigned char both[] = "\x02h2\x08http/1.1\x08http/1.0";
    static const unsigned char h1[] = "\x08http/1.1\x08http/1.0";
    const unsigned char *ours = arg ? both : h1;
    unsigned int ours_len = arg ? sizeof both - 1 : sizeof h1 - 1;
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ours, ours_len, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* client_auth: optional keeps a connection whose certificate does not
 * verify; the app sees why in client_cert_error. */
static int tls_verify_optional(int preverify_ok, X509_STORE_CTX *x)
{
    (void)preverify_ok;
    (void)x;
    return 1;
}

/* Encrypted keys: no prompt on the master's terminal, a clear error. */
static int tls_no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* Which certificate of file (1 = the first) pkey belongs to; 0: none. */
static size_t key_owner(const char *file, EVP_PKEY *pkey)
{
    BIO *in = BIO_new_file(file, "r");
    size_t n = 0, found = 0;
    X509 *x;
    while (in && !found && (x = PEM_read_bio_X509(in, NULL, NULL, NULL))) {
        n++;
        if (X509_check_private_key(x, pkey) == 1)
            found = n;
        X509_free(x);
    }
    BIO_free(in);
    ERR_clear_error();
    return found;
}

/* With TLS 1.2 only, whether some cipher of ctx's list can sign with
 * leaf's key (RSA or ECDSA; other key types are not judged). */
static int tls_ciphers_fit(SSL_CTX *ctx, X509 *leaf)
{
    if (SSL_CTX_get_min_proto_version(ctx) > TLS1_2_VERSION ||
        SSL_CTX_get_max_proto_version(ctx) != TLS1_2_VERSION)
        return 1;
    int kt = EVP_PKEY_get_base_id(X509_get0_pubkey(leaf));
    int want = kt == EVP_PKEY_RSA ? NID_auth_rsa : kt == EVP_PKEY_EC ? NID_auth_ecdsa : NID_undef;
    if (want == NID_undef)
        return 1;
    STACK_OF(SSL_CIPHER) *list = SSL_CTX_get_ciphers(ctx);
    for (int i = 0; list && i < sk_SSL_CIPHER_num(list); i++) {
        const SSL_CIPHER *ci = sk_SSL_CIPHER_value(list, i);
        if (SSL_CIPHER_get_kx_nid(ci) == NID_kx_any) /* a TLS 1.3 suite */
            continue;
        int auth = SSL_CIPHER_get_auth_nid(ci);
        if (auth == want || auth == NID_auth_any)
            return 1;
    }
    return 0;
}

static int tls_load_cert(const pagid_config *c, SSL_CTX *ctx, const pagid_tls_cert *pc, FILE *err)
{
    char why[256];
    if (SSL_CTX_use_certificate_chain_file(ctx, pc->cert) != 1) {
        config_report(
            c, pc->pos, err, "cannot load certificate '%s': %s", pc->cert,
            load_error_text(pc->cert, "CERTIFICATE", cert_markers, why, sizeof why, "unreadable"));
        return -1;
    }
    /* Read here (not by SSL_CTX_use_PrivateKey_file) to tell an unreadable
     * key from one that belongs to another certificate. */
    BIO *in = BIO_new_file(pc->key, "r");
    EVP_PKEY *pkey = in ? PEM_read_bio_PrivateKey(in, NULL, tls_no_passphrase, NULL) : NULL;
    BIO_free(in);
    if (!pkey && ERR_GET_REASON(ERR_peek_last_error()) == PEM_R_BAD_PASSWORD_READ) {
        config_report(c, pc->key_pos, err,
                      "private key '%s' is encrypted: pagid reads keys without a passphrase "
                      "(keep it readable by root only instead)",
                      pc->key);
        ERR_clear_error();
        return -1;
    }
    if (!pkey) {
        config_report(
            c, pc->key_pos, err, "cannot load private key '%s': %s", pc->key,
            load_error_text(pc->key, "PRIVATE KEY", key_markers, why, sizeof why, "unreadable"));
        return -1;
    }
    int rc = 0;
    int mismatch = X509_check_private_key(SSL_CTX_get0_certificate(ctx), pkey) != 1;
    size_t which = mismatch ? key_owner(pc->cert, pkey) : 0;
    if (which > 1) {
        config_report(c, pc->pos, err,
                      "the server's certificate must come first in %s; it is certificate %zu "
                      "(the one private key '%s' belongs to)",
                      pc->cert, which, pc->key);
        rc = -1;
    } else if (mismatch) {
        config_report(c, pc->key_pos, err, "private key '%s' does not match certificate '%s'",
                      pc->key, pc->cert);
        rc = -1;
    } else if (SSL_CTX_use_PrivateKey(ctx, pkey) != 1) {
        config_report(c, pc->key_pos, err, "cannot use private key '%s': %s", pc->key,
                      ssl_error_text(why, sizeof why, "unusable"));
        rc = -1;
    }
    EVP_PKEY_free(pkey);
    ERR_clear_error();
    if (rc == 0 && pc->ocsp && tls_ocsp_load(c, ctx, pc, err) < 0)
        rc = -1;
    if (rc == 0 && !tls_ciphers_fit(ctx, SSL_CTX_get0_certificate(ctx))) {
        const char *kind =
            EVP_PKEY_get_base_id(X509_get0_pubkey(SSL_CTX_get0_certificate(ctx))) == EVP_PKEY_RSA
                ? "RSA"
                : "ECDSA";
        config_report(c, pc->pos, err,
                      "no cipher of the TLS 1.2 list can be used with certificate '%s' (an %s "
                      "key) and protocols allow only TLS 1.2: add ECDHE-%s-... ciphers",
                      pc->cert, kind, kind);
        rc = -1;
    }
    return rc;
}

/* The CRLs of t->client_crl into store, checked for the whole chain (as
 * nginx's ssl_crl): a client certificate, or an intermediate CA, that a
 * CRL revokes is refused; so is every client once the CRL has expired
 * (its nextUpdate passed), until a fresh one is loaded by a reload. */
static int tls_load_crl(const pagid_config *c, X509_STORE *store, const pagid_tls *t, FILE *err)
{
    X509_LOOKUP *lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    int n = lookup ? X509_load_crl_file(lookup, t->client_crl, X509_FILETYPE_PEM) : 0;
    if (n <= 0) {
        char why[256];
        config_report(c, t->client_crl_pos, err, "cannot load CRL '%s': %s", t->client_crl,
                      load_error_text(t->client_crl, "X509 CRL", crl_markers, why, sizeof why,
                                      "no CRL in the file"));
        ERR_clear_error();
        return -1;
    }
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
    return 0;
}

static int tls_setup_client_auth(const pagid_config *c, SSL_CTX *ctx, const pagid_tls *t, FILE *err)
{
    char why[256];
    if (t->client_auth == TLS_CLIENT_NONE)
        return 0;
    if (SSL_CTX_load_verify_locations(ctx, t->client_ca, NULL) != 1) {
        config_report(c, t->client_ca_pos, err, "cannot load client CA '%s': %s", t->client_ca,
                      load_error_text(t->client_ca, "CERTIFICATE", cert_markers, why, sizeof why,
                                      "unreadable"));
        return -1;
    }
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->client_ca);
    if (names)
        SSL_CTX_set_client_CA_list(ctx, names);
    ERR_clear_error();
    if (t->verify_depth >= 0)
        SSL_CTX_set_verify_depth(ctx, t->verify_depth);
    if (t->client_crl && tls_load_crl(c, SSL_CTX_get_cert_store(ctx), t, err) < 0)
        return -1;
    if (t->client_auth == TLS_CLIENT_REQUIRE)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    else
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, tls_verify_optional);
    return 0;
}

/* The SNI choice: an exact name first, then a wildcard (one label), in the
 * order of the mapping; no match or no name keeps the default. */
static int tls_servername(SSL *ssl, int *alert, void *arg)
{
    (void)alert;
    const tls_server *ts = arg;
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (!sni || !*sni || ts->n < 2)
        return SSL_TLSEXT_ERR_OK;
    /* A fully qualified name ("a.example.test.") is the same host. */
    char name[256];
    size_t len = strlen(sni);
    if (len >= sizeof name)
        return SSL_TLSEXT_ERR_OK;
    memcpy(name, sni, len + 1);
    if (len > 1 && name[len - 1] == '.')
        name[len - 1] = '\0';
    static const unsigned flags[] = {X509_CHECK_FLAG_NO_WILDCARDS,
                                     X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS};
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < ts->n; i++) {
            X509 *leaf = SSL_CTX_get0_certificate(ts->ctx[i]);
            if (leaf && X509_check_host(leaf, name, 0, flags[pass], NULL) == 1) {
                if (i > 0 && !SSL_set_SSL_CTX(ssl, ts->ctx[i]))
                    return SSL_TLSEXT_ERR_ALERT_FATAL;
                return SSL_TLSEXT_ERR_OK;
            }
        }
    }
    return SSL_TLSEXT_ERR_OK;
}

/* protocols "TLSv1.2 TLSv1.3" (config_yaml_tls.c's normal form). */
static void tls_versions(const char *protocols, int *min, int *max)
{
    *min = TLS1_2_VERSION;
    *max = TLS1_3_VERSION;
    if (!protocols)
        return;
    int v12 = strstr(protocols, "TLSv1.2") != NULL, v13 = strstr(protocols, "TLSv1.3") != NULL;
    if (v12 && !v13)
        *max = TLS1_2_VERSION;
    if (v13 && !v12)
        *min = TLS1_3_VERSION;
}

/* One context with the listener's policy and certificate pc; NULL after
 * reporting. */
static SSL_CTX *tls_ctx_new(const pagid_config *c, const pagid_listen *l, const pagid_tls_cert *pc,
                            tls_server *ts, FILE *err)
{
    const pagid_tls *t = l->tls;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        config_report(c, l->pos, err, "cannot set up TLS for %s: out of memory", l->spec);
        return NULL;
    }
    int min, max;
    tls_versions(t->protocols, &min, &max);
    SSL_CTX_set_min_proto_version(ctx, min);
    SSL_CTX_set_max_proto_version(ctx, max);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_ENABLE_KTLS | SSL_OP_PRIORITIZE_CHACHA);
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
    /* Any non-NULL arg means "h2 too"; a static object, so nothing to free. */
    static const char h2_on = 1;
    SSL_CTX_set_alpn_select_cb(ctx, tls_alpn_select,
                               config_listen_h2(l) ? (void *)(uintptr_t)&h2_on : NULL);
    /* The session ID context is the listener's identity, set by
     * tls_server_new once every certificate is loaded. */
    /* A per-process session cache would resume only on the worker that
     * made the session: resumption is by tickets, which every worker reads. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_timeout(ctx, TLS_TICKET_ROTATE_SECONDS);
    int bad = 0;
    if (ts->tickets) {
        if (tls_tickets_attach(ts->tickets, ctx) < 0) {
            config_report(c, t->pos, err, "cannot set up session tickets");
            bad = 1;
        }
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    if (SSL_CTX_set_cipher_list(ctx, t->ciphers ? t->ciphers : PAGID_TLS_DEFAULT_CIPHERS) != 1) {
        config_report(c, t->ciphers ? t->ciphers_pos : t->pos, err,
                      "no usable cipher in '%s' (an OpenSSL TLS 1.2 cipher list)",
                      t->ciphers ? t->ciphers : PAGID_TLS_DEFAULT_CIPHERS);
        bad = 1;
    }
    if (SSL_CTX_set_ciphersuites(ctx, t->ciphersuites ? t->ciphersuites
                                                      : PAGID_TLS_DEFAULT_SUITES) != 1) {
        config_report(c, t->ciphersuites_pos, err,
                      "no usable TLS 1.3 cipher suite in '%s' (e.g. TLS_AES_128_GCM_SHA256)",
                      t->ciphersuites);
        bad = 1;
    }
    /* One list for TLS 1.2's ECDHE curves and TLS 1.3's key shares. The
     * names were checked when the config loaded; OpenSSL may still lack
     * one (X448 under a FIPS provider). */
    pagid_pos gpos;
    const char *groups = tls_server_groups(c, t, &gpos);
    if (SSL_CTX_set1_groups_list(ctx, groups) != 1) {
        config_report(c, gpos, err, "TLS groups '%s' are not all available in %s", groups,
                      OpenSSL_version(OPENSSL_VERSION));
        bad = 1;
    }
    ERR_clear_error();
    if (tls_load_cert(c, ctx, pc, err) < 0)
        bad = 1;
    if (tls_setup_client_auth(c, ctx, t, err) < 0)
        bad = 1;
    if (bad) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* Certificates with the same names share one context: OpenSSL keeps one
 * certificate per key type in it (RSA, ECDSA, ...) and serves the one the
 * client's signature algorithms allow, which SNI, stopping at the first
 * context whose names match, could not do across contexts. */

/* Calls fn on each DNS name of x (its common name when it has none) until fn
 * returns 0; returns 0 if fn did, else 1. */
static int each_name(X509 *x, int (*fn)(const char *s, size_t len, void *arg), void *arg)
{
    GENERAL_NAMES *g = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    int dns = 0, go = 1;
    for (int i = 0; g && go && i < sk_GENERAL_NAME_num(g); i++) {
        const GENERAL_NAME *n = sk_GENERAL_NAME_value(g, i);
        if (n->type != GEN_DNS)
            continue;
        dns = 1;
        go = fn((const char *)ASN1_STRING_get0_data(n->d.dNSName),
                (size_t)ASN1_STRING_length(n->d.dNSName), arg);
    }
    GENERAL_NAMES_free(g);
    if (dns || !go)
        return go;
    X509_NAME *sub = X509_get_subject_name(x);
    int i = X509_NAME_get_index_by_NID(sub, NID_commonName, -1);
    ASN1_STRING *cn = i >= 0 ? X509_NAME_ENTRY_get_data(X509_NAME_get_entry(sub, i)) : NULL;
    return cn ? fn((const char *)ASN1_STRING_get0_data(cn), (size_t)ASN1_STRING_length(cn), arg)
              : 1;
}

typedef struct name_probe {
    const char *s;
    size_t len;
    int found;
} name_probe;

static int probe_name(const char *s, size_t len, void *arg)
{
    name_probe *p = arg;
    p->found = len == p->len && !strncasecmp(s, p->s, len);
    return !p->found;
}

/* fn for each_name: 1 while the name is also one of arg's (an X509). */
static int name_in(const char *s, size_t len, void *arg)
{
    name_probe p = {s, len, 0};
    each_name(arg, probe_name, &p);
    return p.found;
}

static int same_names(X509 *a, X509 *b)
{
    return each_name(a, name_in, b) && each_name(b, name_in, a);
}

static int key_type(X509 *x)
{
    EVP_PKEY *k = X509_get0_pubkey(x);
    return k ? EVP_PKEY_get_base_id(k) : -1;
}

/* The first certificate of file, or NULL (tls_load_cert reports why). */
static X509 *read_leaf(const char *file)
{
    BIO *in = BIO_new_file(file, "r");
    X509 *x = in ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
    BIO_free(in);
    ERR_clear_error();
    return x;
}

/* Each certificate of ctx in turn (ctx's current one moves). */
#define FOR_EACH_CERT(ctx)                                                                         \
    for (int more_ = SSL_CTX_set_current_cert((ctx), SSL_CERT_SET_FIRST) == 1; more_;              \
         more_ = SSL_CTX_set_current_cert((ctx), SSL_CERT_SET_NEXT) == 1)

/* Whether ctx already has a certificate of key type kt. */
static int ctx_has_key_type(SSL_CTX *ctx, int kt)
{
    int has = 0;
    FOR_EACH_CERT(ctx)
    has |= key_type(SSL_CTX_get0_certificate(ctx)) == kt;
    return has;
}

/* Hash the contents of file into md (a missing file hashes as its name
 * only: tls_setup_client_auth has already reported it). */
static void hash_file(EVP_MD_CTX *md, const char *file)
{
    EVP_DigestUpdate(md, file, strlen(file) + 1);
    FILE *f = fopen(file, "rbe");
    if (!f)
        return;
    unsigned char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate(md, buf, got);
    fclose(f);
}

static void hash_x509(EVP_MD_CTX *md, X509 *x)
{
    unsigned char *der = NULL;
    int len = x ? i2d_X509(x, &der) : -1;
    if (len > 0)
        EVP_DigestUpdate(md, der, (size_t)len);
    OPENSSL_free(der);
}

/* The listener's identity: SHA-256 over what a resumed session skips
 * checking (its address, client_auth mode, CAs, CRLs and depth, every
 * certificate and chain). It is the session ID context of all its contexts, so OpenSSL
 * refuses a TLS 1.2 ticket or a TLS 1.3 PSK from another listener, or from
 * this one before its CAs or certificates changed; it also goes into the
 * derived ticket keys. 0 or -1. */
static int tls_listener_id(const pagid_listen *l, const tls_server *ts,
                           unsigned char id[TLS_TICKET_ID_LEN])
{
    const pagid_tls *t = l->tls;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return -1;
    }
    EVP_DigestUpdate(md, "pagid listener", 15);
    EVP_DigestUpdate(md, l->spec, strlen(l->spec) + 1);
    unsigned char mode = (unsigned char)t->client_auth;
    EVP_DigestUpdate(md, &mode, 1);
    if (t->client_auth != TLS_CLIENT_NONE && t->client_ca)
        hash_file(md, t->client_ca);
    /* A new CRL or a stricter depth: sessions verified before do not resume. */
    if (t->client_auth != TLS_CLIENT_NONE && t->client_crl)
        hash_file(md, t->client_crl);
    int depth = t->verify_depth;
    EVP_DigestUpdate(md, &depth, sizeof depth);
    for (size_t i = 0; i < ts->n; i++) {
        FOR_EACH_CERT(ts->ctx[i])
        {
            hash_x509(md, SSL_CTX_get0_certificate(ts->ctx[i]));
            STACK_OF(X509) *chain = NULL;
            if (SSL_CTX_get0_chain_certs(ts->ctx[i], &chain) == 1 && chain)
                for (int j = 0; j < sk_X509_num(chain); j++)
                    hash_x509(md, sk_X509_value(chain, j));
        }
    }
    unsigned char full[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    int ok = EVP_DigestFinal_ex(md, full, &len) == 1 && len >= TLS_TICKET_ID_LEN;
    EVP_MD_CTX_free(md);
    if (ok)
        memcpy(id, full, TLS_TICKET_ID_LEN);
    return ok ? 0 : -1;
}

tls_server *tls_server_new(const pagid_config *c, const pagid_listen *l, FILE *err)
{
    const pagid_tls *t = l->tls;
    tls_server *ts = calloc(1, sizeof *ts);
    if (!ts || !(ts->ctx = calloc(t->n_certs ? t->n_certs : 1, sizeof *ts->ctx))) {
        config_report(c, l->pos, err, "cannot set up TLS for %s: out of memory", l->spec);
        free(ts);
        return NULL;
    }
    int bad = t->n_certs == 0;
    if (t->session_tickets && !(ts->tickets = tls_tickets_new(c, t, err)))
        bad = 1;
    /* Every certificate is tried, so one run names every broken file. */
    for (size_t i = 0; i < t->n_certs; i++) {
        const pagid_tls_cert *pc = &t->certs[i];
        X509 *leaf = read_leaf(pc->cert);
        size_t j = 0;
        while (leaf && j < ts->n && !same_names(leaf, SSL_CTX_get0_certificate(ts->ctx[j])))
            j++;
        if (leaf && j < ts->n) {
            if (ctx_has_key_type(ts->ctx[j], key_type(leaf))) {
                config_report(c, pc->pos, err,
                              "certificate '%s' has the same names and key type as an earlier "
                              "one of this listener: it could never be served (give certificates "
                              "for the same names different key types, e.g. RSA and ECDSA)",
                              pc->cert);
                bad = 1;
            } else if (tls_load_cert(c, ts->ctx[j], pc, err) < 0) {
                bad = 1;
            }
            X509_free(leaf);
            continue;
        }
        X509_free(leaf);
        SSL_CTX *ctx = tls_ctx_new(c, l, pc, ts, err);
        if (!ctx) {
            bad = 1;
            continue;
        }
        ts->ctx[ts->n++] = ctx;
    }
    unsigned char id[TLS_TICKET_ID_LEN];
    if (!bad && tls_listener_id(l, ts, id) < 0) {
        config_report(c, t->pos, err, "cannot set up TLS for %s: no SHA-256", l->spec);
        bad = 1;
    }
    /* Every context alike: SSL_set_SSL_CTX (SNI) carries the context over
     * only when the old and new ones agree. */
    for (size_t i = 0; !bad && i < ts->n; i++)
        if (SSL_CTX_set_session_id_context(ts->ctx[i], id, sizeof id) != 1)
            bad = 1;
    if (!bad && ts->tickets && tls_tickets_bind(ts->tickets, id) < 0) {
        config_report(c, t->pos, err, "cannot make session ticket keys (HKDF)");
        bad = 1;
    }
    if (bad) {
        tls_server_free(ts);
        return NULL;
    }
    SSL_CTX_set_tlsext_servername_callback(ts->ctx[0], tls_servername);
    SSL_CTX_set_tlsext_servername_arg(ts->ctx[0], ts);
    return ts;
}

void tls_server_free(tls_server *ts)
{
    if (!ts)
        return;
    for (size_t i = 0; i < ts->n; i++)
        SSL_CTX_free(ts->ctx[i]);
    free(ts->ctx);
    tls_tickets_free(ts->tickets);
    free(ts);
}

struct ssl_ctx_st *tls_server_ssl_ctx(const tls_server *ts)
{
    return ts->ctx[0];
}

size_t tls_server_cert_count(const tls_server *ts)
{
    return ts->n;
}

struct x509_st *tls_server_leaf(const tls_server *ts, size_t i)
{
    return i < ts->n ? SSL_CTX_get0_certificate(ts->ctx[i]) : NULL;
}

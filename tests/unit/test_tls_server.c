/*
 * test_tls_server.c - Check suite for src/common/tls_server.c and
 * tls_tickets.c: contexts built from a tls: mapping, driven through
 * in-memory handshakes (BIO pairs): SNI picks the certificate, a session
 * ticket made by one context resumes on another built from the same keys
 * (another worker, another generation), key files are checked, the
 * listener's groups decide the key exchange, and ALPN with nothing in common
 * is refused with no_application_protocol.
 */
#include <check.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/tls_server.h"
#include "common/tls_tickets.h"

static char dir[64];

/* A self-signed P-256 certificate for cn (SAN dns when given): dir/name.pem, .key. */
static void make_cert(const char *name, const char *cn, const char *dns)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    ck_assert_ptr_nonnull(k);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 30);
    X509_set_pubkey(x, k);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, n);
    if (dns) {
        char v[128];
        snprintf(v, sizeof v, "DNS:%s", dns);
        X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, v);
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
    }
    ck_assert_int_gt(X509_sign(x, k, EVP_sha256()), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/%s.pem", dir, name);
    FILE *f = fopen(path, "w");
    PEM_write_X509(f, x);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s.key", dir, name);
    f = fopen(path, "w");
    PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(k);
}

static void write_bytes(const char *name, size_t n, unsigned seed)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; i < n; i++)
        fputc((int)(i * 7 + seed), f); /* seed: each file its own key name */
    fclose(f);
}

static void setup(void)
{
    strcpy(dir, "/tmp/pagid-tls-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    make_cert("dflt", "default", "localhost");
    make_cert("wild", "wildcard", "*.example.com");
    write_bytes("t80", 80, 1);
    write_bytes("t48", 48, 2);
    write_bytes("t20", 20, 3);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A config with one TLS listener: the default and wildcard certificates
 * plus extra lines under tls:. */
static void load(pagid_config *c, const char *extra)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "listen:\n  - address: 127.0.0.1:8443\n    tls:\n"
             "      cert: %s/dflt.pem\n      key: %s/dflt.key\n"
             "      certificates: [{cert: %s/wild.pem, key: %s/wild.key}]\n%s",
             dir, dir, dir, dir, extra);
    config_init_defaults(c);
    ck_assert_int_eq(config_load_string(c, yaml, "t.yaml", stderr), 0);
}

/* One handshake in memory; returns the client's SSL (caller frees) after
 * it completed, or NULL when it failed. */
static SSL *handshake(tls_server *ts, SSL_CTX *cctx, const char *sni, SSL_SESSION *resume)
{
    SSL *s = SSL_new(tls_server_ssl_ctx(ts)), *cl = SSL_new(cctx);
    BIO *sb, *cb;
    ck_assert_int_eq(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
    SSL_set_bio(s, sb, sb);
    SSL_set_bio(cl, cb, cb);
    SSL_set_accept_state(s);
    SSL_set_connect_state(cl);
    if (sni)
        SSL_set_tlsext_host_name(cl, sni);
    if (resume)
        SSL_set_session(cl, resume);
    int done_s = 0, done_c = 0;
    for (int i = 0; i < 50 && !(done_s && done_c); i++) {
        if (!done_c) {
            int r = SSL_do_handshake(cl);
            if (r == 1)
                done_c = 1;
            else if (SSL_get_error(cl, r) != SSL_ERROR_WANT_READ)
                break;
        }
        if (!done_s) {
            int r = SSL_do_handshake(s);
            if (r == 1)
                done_s = 1;
            else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ)
                break;
        }
    }
    /* A connection freed without a shutdown marks its session not
     * resumable: these end as if closed cleanly. */
    SSL_set_shutdown(s, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_set_shutdown(cl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(s);
    ERR_clear_error();
    if (!(done_s && done_c)) {
        SSL_free(cl);
        return NULL;
    }
    return cl;
}

static const char *peer_cn(SSL *cl, char *out, size_t outlen)
{
    X509 *x = SSL_get0_peer_certificate(cl);
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, out, (int)outlen);
    return out;
}

static SSL_CTX *client_ctx(void)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    /* TLS 1.2: the ticket arrives inside the handshake. */
    SSL_CTX_set_max_proto_version(c, TLS1_2_VERSION);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT);
    return c;
}

START_TEST(test_sni_picks_certificate)
{
    pagid_config c;
    load(&c, "");
    tls_server *ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    ck_assert_uint_eq(tls_server_cert_count(ts), 2);
    SSL_CTX *cctx = client_ctx();
    static const char *const cases[][2] = {
        {"a.example.com", "wildcard"},  {"A.EXAMPLE.COM", "wildcard"},
        {"a.b.example.com", "default"}, {"example.com", "default"},
        {"localhost", "default"},       {NULL, "default"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cn[64];
        SSL *cl = handshake(ts, cctx, cases[i][0], NULL);
        ck_assert_ptr_nonnull(cl);
        ck_assert_msg(!strcmp(peer_cn(cl, cn, sizeof cn), cases[i][1]), "SNI %s got %s",
                      cases[i][0] ? cases[i][0] : "(none)", cn);
        SSL_free(cl);
    }
    SSL_CTX_free(cctx);
    tls_server_free(ts);
    config_free(&c);
}
END_TEST

/* A session of one context resumes on another built from the same keys:
 * derived keys (the master's secret) and key files alike; not on one with
 * other keys, nor with tickets off. */
static void resumes_between(const char *extra_a, const char *extra_b, int want)
{
    pagid_config ca, cb;
    load(&ca, extra_a);
    load(&cb, extra_b);
    tls_server *a = tls_server_new(&ca, &ca.listens[0], stderr);
    tls_server *b = tls_server_new(&cb, &cb.listens[0], stderr);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    SSL_CTX *cctx = client_ctx();
    SSL *cl = handshake(a, cctx, "localhost", NULL);
    ck_assert_ptr_nonnull(cl);
    SSL_SESSION *sess = SSL_get1_session(cl);
    SSL_free(cl);
    cl = handshake(b, cctx, "localhost", sess);
    ck_assert_ptr_nonnull(cl);
    ck_assert_msg(SSL_session_reused(cl) == want, "resumption from [%s] on [%s]: %d", extra_a,
                  extra_b, SSL_session_reused(cl));
    SSL_free(cl);
    SSL_SESSION_free(sess);
    SSL_CTX_free(cctx);
    tls_server_free(a);
    tls_server_free(b);
    config_free(&ca);
    config_free(&cb);
}

START_TEST(test_ticket_resumption)
{
    char k80[128], k48[128], both[300];
    snprintf(k80, sizeof k80, "      session_ticket_key: %s/t80\n", dir);
    snprintf(k48, sizeof k48, "      session_ticket_key: %s/t48\n", dir);
    snprintf(both, sizeof both, "      session_ticket_key: [%s/t48, %s/t80]\n", dir, dir);
    resumes_between("", "", 1);    /* derived: the same secret */
    resumes_between(k80, k80, 1);  /* one file, two contexts */
    resumes_between(k48, k48, 1);  /* the 48-byte format */
    resumes_between(k80, both, 1); /* an older key still decrypts */
    resumes_between(k80, k48, 0);  /* other keys: a full handshake */
    resumes_between(k80, "", 0);   /* file vs derived */
    resumes_between("", "      session_tickets: false\n", 0);
}
END_TEST

static long long fake_now;
static long long fake_clock(void)
{
    return fake_now;
}

/* Resume with sess; returns the client's new session (caller frees) and
 * whether the handshake resumed. */
static SSL_SESSION *resume(tls_server *ts, SSL_CTX *cctx, SSL_SESSION *sess, int *reused)
{
    SSL *cl = handshake(ts, cctx, "localhost", sess);
    ck_assert_ptr_nonnull(cl);
    *reused = SSL_session_reused(cl);
    SSL_SESSION *out = SSL_get1_session(cl);
    SSL_free(cl);
    return out;
}

static int same_ticket(SSL_SESSION *a, SSL_SESSION *b)
{
    const unsigned char *ta, *tb;
    size_t la, lb;
    SSL_SESSION_get0_ticket(a, &ta, &la);
    SSL_SESSION_get0_ticket(b, &tb, &lb);
    return la == lb && la > 0 && memcmp(ta, tb, la) == 0;
}

/* Derived keys rotate each hour: a ticket of the previous hour still
 * resumes and is renewed; one two hours old makes a full handshake. */
START_TEST(test_ticket_rotation)
{
    pagid_config c;
    load(&c, "");
    fake_now = 1800000000LL / TLS_TICKET_ROTATE_SECONDS * TLS_TICKET_ROTATE_SECONDS + 10;
    tls_tickets_set_clock(fake_clock);
    tls_server *ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    SSL_CTX *cctx = client_ctx();
    int reused;
    SSL_SESSION *first = resume(ts, cctx, NULL, &reused);
    ck_assert_int_eq(reused, 0);
    SSL_SESSION *same = resume(ts, cctx, first, &reused);
    ck_assert_int_eq(reused, 1);
    ck_assert_msg(same_ticket(first, same), "a TLS 1.2 ticket of the current key was renewed");

    fake_now += TLS_TICKET_ROTATE_SECONDS; /* the next hour */
    SSL_SESSION *renewed = resume(ts, cctx, first, &reused);
    ck_assert_int_eq(reused, 1);
    ck_assert_msg(!same_ticket(first, renewed), "the previous hour's ticket was not renewed");

    fake_now += TLS_TICKET_ROTATE_SECONDS; /* two hours after the first */
    SSL_SESSION *gone = resume(ts, cctx, first, &reused);
    ck_assert_int_eq(reused, 0);
    SSL_SESSION *again = resume(ts, cctx, renewed, &reused);
    ck_assert_int_eq(reused, 1);

    SSL_SESSION_free(first);
    SSL_SESSION_free(same);
    SSL_SESSION_free(renewed);
    SSL_SESSION_free(gone);
    SSL_SESSION_free(again);
    tls_tickets_set_clock(NULL);
    SSL_CTX_free(cctx);
    tls_server_free(ts);
    config_free(&c);
}
END_TEST

START_TEST(test_ticket_key_file_errors)
{
    pagid_config c;
    char extra[160], *text = NULL;
    size_t len = 0;
    snprintf(extra, sizeof extra, "      session_ticket_key: %s/t20\n", dir);
    load(&c, extra);
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_null(tls_server_new(&c, &c.listens[0], f));
    fclose(f);
    char want[256];
    snprintf(want, sizeof want,
             "t.yaml:7:27: session ticket key '%s/t20' must be 48 or 80 bytes (openssl rand 80 > "
             "FILE), not 20\n",
             dir);
    ck_assert_str_eq(text, want);
    free(text);
    config_free(&c);

    snprintf(extra, sizeof extra, "      session_ticket_key: [%s/missing]\n", dir);
    load(&c, extra);
    text = NULL;
    f = open_memstream(&text, &len);
    ck_assert_ptr_null(tls_server_new(&c, &c.listens[0], f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "t.yaml:7:27: cannot read session ticket key"));
    ck_assert_ptr_nonnull(strstr(text, "No such file or directory"));
    free(text);
    config_free(&c);
}
END_TEST

/* A TLS 1.3 client offering only groups (OpenSSL's list syntax) and, when
 * alpn is set, those protocols (wire format). */
static SSL_CTX *client13(const char *groups, const unsigned char *alpn, unsigned alpn_len)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
    ck_assert_int_eq(SSL_CTX_set1_groups_list(c, groups), 1);
    if (alpn)
        ck_assert_int_eq(SSL_CTX_set_alpn_protos(c, alpn, alpn_len), 0);
    return c;
}

/* The name of the group a handshake with a client offering only groups
 * agreed on, into out ("" when the handshake failed). */
static const char *agreed(tls_server *ts, const char *groups, char *out, size_t outlen)
{
    SSL_CTX *cctx = client13(groups, NULL, 0);
    SSL *cl = handshake(ts, cctx, NULL, NULL);
    out[0] = '\0';
    if (cl) {
        const char *name = SSL_group_to_name(cl, SSL_get_negotiated_group(cl));
        snprintf(out, outlen, "%s", name ? name : "?");
    }
    SSL_free(cl);
    SSL_CTX_free(cctx);
    return out;
}

START_TEST(test_groups_decide_key_exchange)
{
    pagid_config c;
    char got[32];
    /* The default: X25519, P-256, P-384; no finite-field group, no P-521. */
    load(&c, "");
    tls_server *ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    ck_assert_str_eq(agreed(ts, "X25519", got, sizeof got), "x25519");
    ck_assert_str_eq(agreed(ts, "P-256", got, sizeof got), "secp256r1");
    ck_assert_str_eq(agreed(ts, "P-384", got, sizeof got), "secp384r1");
    ck_assert_str_eq(agreed(ts, "ffdhe8192", got, sizeof got), "");
    ck_assert_str_eq(agreed(ts, "ffdhe2048", got, sizeof got), "");
    ck_assert_str_eq(agreed(ts, "P-521", got, sizeof got), "");
    /* A key share for a group we refuse: a HelloRetryRequest for one we take. */
    ck_assert_str_eq(agreed(ts, "P-521:P-384", got, sizeof got), "secp384r1");
    tls_server_free(ts);
    config_free(&c);

    /* The listener's own list, on its SNI contexts too. */
    load(&c, "      groups: [P-384, ffdhe3072]\n");
    ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    ck_assert_str_eq(agreed(ts, "X25519", got, sizeof got), "");
    ck_assert_str_eq(agreed(ts, "X25519:P-384", got, sizeof got), "secp384r1");
    ck_assert_str_eq(agreed(ts, "ffdhe3072", got, sizeof got), "ffdhe3072");
    SSL_CTX *cctx = client13("X25519", NULL, 0);
    SSL *cl = handshake(ts, cctx, "a.example.com", NULL);
    ck_assert_ptr_null(cl);
    SSL_CTX_free(cctx);
    tls_server_free(ts);
    config_free(&c);

    /* tls.groups for a listener without its own. */
    load(&c, "tls:\n  groups: [X448]\n");
    ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    ck_assert_str_eq(agreed(ts, "X25519:P-256", got, sizeof got), "");
    ck_assert_str_eq(agreed(ts, "X448", got, sizeof got), "x448");
    tls_server_free(ts);
    config_free(&c);
}
END_TEST

/* One handshake offering alpn (wire format); the protocol chosen into out
 * ("" for none), or -1 when the handshake failed, with the server's error
 * reason in *reason. */
static int alpn_handshake(tls_server *ts, const unsigned char *alpn, unsigned alpn_len, char *out,
                          size_t outlen, int *reason)
{
    SSL_CTX *cctx = client13("X25519", alpn, alpn_len);
    SSL *s = SSL_new(tls_server_ssl_ctx(ts)), *cl = SSL_new(cctx);
    BIO *sb, *cb;
    ck_assert_int_eq(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
    SSL_set_bio(s, sb, sb);
    SSL_set_bio(cl, cb, cb);
    SSL_set_accept_state(s);
    SSL_set_connect_state(cl);
    int done_s = 0, done_c = 0, failed = 0;
    *reason = 0;
    for (int i = 0; i < 50 && !(done_s && done_c) && !failed; i++) {
        int r = SSL_do_handshake(cl);
        done_c = r == 1;
        failed = r != 1 && SSL_get_error(cl, r) != SSL_ERROR_WANT_READ;
        r = SSL_do_handshake(s);
        done_s = r == 1;
        if (r != 1 && SSL_get_error(s, r) != SSL_ERROR_WANT_READ) {
            *reason = ERR_GET_REASON(ERR_peek_error());
            failed = 1;
        }
    }
    /* The alert the client got, if any. */
    SSL_do_handshake(cl);
    const unsigned char *sel = NULL;
    unsigned sel_len = 0;
    SSL_get0_alpn_selected(cl, &sel, &sel_len);
    snprintf(out, outlen, "%.*s", (int)sel_len, sel ? (const char *)sel : "");
    SSL_free(s);
    SSL_free(cl);
    SSL_CTX_free(cctx);
    ERR_clear_error();
    return failed ? -1 : 0;
}

START_TEST(test_alpn_without_common_protocol_is_refused)
{
    /* Octal lengths: "\x03f" would be one hex escape. */
    static const unsigned char foo[] = "\003foo", foo_h1[] = "\003foo\010http/1.1",
                               h2_h1[] = "\002h2\010http/1.1", h2[] = "\002h2",
                               h10[] = "\010http/1.0";
    pagid_config c;
    char got[32];
    int reason;
    load(&c, "");
    tls_server *ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    ck_assert_int_eq(alpn_handshake(ts, foo, sizeof foo - 1, got, sizeof got, &reason), -1);
    ck_assert_int_eq(reason, SSL_R_NO_APPLICATION_PROTOCOL);
    ck_assert_int_eq(alpn_handshake(ts, foo_h1, sizeof foo_h1 - 1, got, sizeof got, &reason), 0);
    ck_assert_str_eq(got, "http/1.1");
    ck_assert_int_eq(alpn_handshake(ts, h2_h1, sizeof h2_h1 - 1, got, sizeof got, &reason), 0);
    ck_assert_str_eq(got, "h2");
    /* curl --http1.0 offers only http/1.0: the HTTP/1 parser serves it. */
    ck_assert_int_eq(alpn_handshake(ts, h10, sizeof h10 - 1, got, sizeof got, &reason), 0);
    ck_assert_str_eq(got, "http/1.0");
    /* No ALPN at all: no answer, the connection speaks HTTP/1.1. */
    ck_assert_int_eq(alpn_handshake(ts, NULL, 0, got, sizeof got, &reason), 0);
    ck_assert_str_eq(got, "");
    tls_server_free(ts);
    config_free(&c);
    /* Without HTTP/2, h2 alone is nothing in common. */
    load(&c, "    http2: false\n");
    ts = tls_server_new(&c, &c.listens[0], stderr);
    ck_assert_ptr_nonnull(ts);
    ck_assert_int_eq(alpn_handshake(ts, h2, sizeof h2 - 1, got, sizeof got, &reason), -1);
    ck_assert_int_eq(reason, SSL_R_NO_APPLICATION_PROTOCOL);
    ck_assert_int_eq(alpn_handshake(ts, h2_h1, sizeof h2_h1 - 1, got, sizeof got, &reason), 0);
    ck_assert_str_eq(got, "http/1.1");
    tls_server_free(ts);
    config_free(&c);
}
END_TEST

static Suite *tls_server_suite(void)
{
    Suite *s = suite_create("tls_server");
    TCase *tc = tcase_create("contexts");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_sni_picks_certificate);
    tcase_add_test(tc, test_ticket_resumption);
    tcase_add_test(tc, test_ticket_rotation);
    tcase_add_test(tc, test_ticket_key_file_errors);
    tcase_add_test(tc, test_groups_decide_key_exchange);
    tcase_add_test(tc, test_alpn_without_common_protocol_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(tls_server_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

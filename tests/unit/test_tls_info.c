/*
 * test_tls_info.c - Check suite for src/worker/tls_info.c: the PAGI tls
 * extension's facts read from a real TLS 1.3 session, handshaken in memory
 * (a BIO pair) with certificates made here, their sharing and their life
 * past the session; and pagi_scope_tls on scopes that hold them.
 */
#include <check.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

#include "worker/scope/scope.h"
#include "worker/core/tls_info.h"
#include "worker/worker_ctx.h"

/* ---- certificates ---- */

typedef struct pki_cert {
    EVP_PKEY *key;
    X509 *cert;
} pki_cert;

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    ck_assert_ptr_nonnull(e);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
}

/* A P-256 certificate for subject (a list of field=value pairs, most
 * general first, as X509_NAME holds them), signed by issuer (NULL: self). */
static pki_cert make_cert(const char *const *subject, const pki_cert *issuer, int ca, long serial)
{
    pki_cert c = {EVP_EC_gen("P-256"), X509_new()};
    ck_assert_ptr_nonnull(c.key);
    X509_set_version(c.cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c.cert), serial);
    X509_gmtime_adj(X509_getm_notBefore(c.cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(c.cert), 3600);
    X509_NAME *n = X509_get_subject_name(c.cert);
    for (size_t i = 0; subject[i]; i += 2)
        ck_assert_int_eq(X509_NAME_add_entry_by_txt(n, subject[i], MBSTRING_UTF8,
                                                    (const unsigned char *)subject[i + 1], -1, -1,
                                                    0),
                         1);
    X509_set_issuer_name(c.cert, issuer ? X509_get_subject_name(issuer->cert) : n);
    X509_set_pubkey(c.cert, c.key);
    X509 *icert = issuer ? issuer->cert : c.cert;
    add_ext(c.cert, icert, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (!ca)
        add_ext(c.cert, icert, NID_ext_key_usage, "serverAuth,clientAuth");
    ck_assert_int_gt(X509_sign(c.cert, issuer ? issuer->key : c.key, EVP_sha256()), 0);
    return c;
}

static void free_cert(pki_cert *c)
{
    X509_free(c->cert);
    EVP_PKEY_free(c->key);
}

static char *pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, x);
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *r = strndup(p, (size_t)n);
    BIO_free(b);
    return r;
}

static pki_cert ca, other_ca, server, alice, mallory;

static void make_pki(void)
{
    static const char *const ca_name[] = {"CN", "unit CA", NULL};
    static const char *const other_name[] = {"CN", "other CA", NULL};
    static const char *const server_name[] = {"CN", "localhost", NULL};
    static const char *const alice_name[] = {"C",  "FR",           "O", "Acme, Inc.",
                                             "CN", "Alice Müller", NULL};
    static const char *const mallory_name[] = {"CN", "mallory", NULL};
    ca = make_cert(ca_name, NULL, 1, 1);
    other_ca = make_cert(other_name, NULL, 1, 2);
    server = make_cert(server_name, &ca, 0, 3);
    alice = make_cert(alice_name, &ca, 0, 4);
    mallory = make_cert(mallory_name, &other_ca, 0, 5);
}

static void free_pki(void)
{
    free_cert(&ca);
    free_cert(&other_ca);
    free_cert(&server);
    free_cert(&alice);
    free_cert(&mallory);
}

/* ---- an in-memory handshake ---- */

static int accept_any(int ok, X509_STORE_CTX *x)
{
    (void)ok;
    (void)x;
    return 1; /* client_auth optional: a failed verify keeps the connection */
}

typedef struct pair {
    SSL_CTX *sctx, *cctx;
    SSL *srv, *cli;
} pair;

/* A server session, handshaken with a client presenting client (and extra
 * after it) or nothing; the client is kept to TLS 1.2 when tls12. */
static pair handshake(const pki_cert *client, const pki_cert *extra, int tls12)
{
    pair p;
    p.sctx = SSL_CTX_new(TLS_server_method());
    p.cctx = SSL_CTX_new(TLS_client_method());
    ck_assert_int_eq(SSL_CTX_use_certificate(p.sctx, server.cert), 1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey(p.sctx, server.key), 1);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(p.sctx), ca.cert);
    SSL_CTX_set_verify(p.sctx, SSL_VERIFY_PEER, accept_any);
    SSL_CTX_set_verify(p.cctx, SSL_VERIFY_NONE, NULL);
    if (tls12)
        SSL_CTX_set_max_proto_version(p.cctx, TLS1_2_VERSION);
    if (client) {
        ck_assert_int_eq(SSL_CTX_use_certificate(p.cctx, client->cert), 1);
        ck_assert_int_eq(SSL_CTX_use_PrivateKey(p.cctx, client->key), 1);
        if (extra)
            ck_assert_int_eq(SSL_CTX_add1_chain_cert(p.cctx, extra->cert), 1);
    }
    p.srv = SSL_new(p.sctx);
    p.cli = SSL_new(p.cctx);
    BIO *a, *b;
    ck_assert_int_eq(BIO_new_bio_pair(&a, 0, &b, 0), 1);
    SSL_set_bio(p.srv, a, a);
    SSL_set_bio(p.cli, b, b);
    SSL_set_accept_state(p.srv);
    SSL_set_connect_state(p.cli);
    int sdone = 0, cdone = 0;
    for (int i = 0; i < 100 && !(sdone && cdone); i++) {
        if (!cdone)
            cdone = SSL_do_handshake(p.cli) == 1;
        if (!sdone)
            sdone = SSL_do_handshake(p.srv) == 1;
    }
    ck_assert_msg(sdone && cdone, "handshake: %s", ERR_reason_error_string(ERR_peek_last_error()));
    return p;
}

static void pair_free(pair *p)
{
    SSL_free(p->srv);
    SSL_free(p->cli);
    SSL_CTX_free(p->sctx);
    SSL_CTX_free(p->cctx);
}

/* ---- the facts ---- */

START_TEST(facts_of_a_mutual_tls13_session)
{
    pair p = handshake(&alice, &ca, 0);
    tls_info *i = tls_info_new(p.srv);
    ck_assert_ptr_nonnull(i);
    const pagi_tls_info *t = tls_info_get(i);
    ck_assert_ptr_nonnull(t);
    char *want = pem(server.cert);
    ck_assert_str_eq(t->server_cert, want);
    free(want);
    ck_assert_uint_eq(t->client_cert_count, 2);
    want = pem(alice.cert);
    ck_assert_str_eq(t->client_cert_chain[0], want); /* leaf first */
    free(want);
    want = pem(ca.cert);
    ck_assert_str_eq(t->client_cert_chain[1], want);
    free(want);
    /* RFC 4514: most specific first, the comma escaped, UTF-8 as it is. */
    ck_assert_str_eq(t->client_cert_name, "CN=Alice Müller,O=Acme\\, Inc.,C=FR");
    ck_assert_ptr_null(t->client_cert_error);
    ck_assert_int_eq(t->tls_version, 0x0304);
    ck_assert_int_eq(t->cipher_suite,
                     (int)SSL_CIPHER_get_protocol_id(SSL_get_current_cipher(p.cli)));
    ck_assert_int_eq(t->cipher_suite >> 8, 0x13);
    for (size_t k = 0; k < sizeof t->reserved / sizeof t->reserved[0]; k++)
        ck_assert_ptr_null(t->reserved[k]);
    ck_assert_ptr_eq(tls_info_get(i), t); /* made once */
    tls_info_conn_gone(i);
    pair_free(&p);
}
END_TEST

START_TEST(no_client_certificate_tls12)
{
    pair p = handshake(NULL, NULL, 1);
    tls_info *i = tls_info_new(p.srv);
    const pagi_tls_info *t = tls_info_get(i);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_nonnull(t->server_cert);
    ck_assert_uint_eq(t->client_cert_count, 0);
    ck_assert_ptr_null(t->client_cert_chain);
    ck_assert_ptr_null(t->client_cert_name);
    ck_assert_ptr_null(t->client_cert_error);
    ck_assert_int_eq(t->tls_version, 0x0303);
    ck_assert_int_eq(t->cipher_suite,
                     (int)SSL_CIPHER_get_protocol_id(SSL_get_current_cipher(p.cli)));
    ck_assert_int_eq(t->cipher_suite >> 8, 0xC0); /* an ECDHE suite */
    tls_info_conn_gone(i);
    pair_free(&p);
}
END_TEST

START_TEST(untrusted_client_certificate_has_an_error)
{
    pair p = handshake(&mallory, NULL, 0);
    tls_info *i = tls_info_new(p.srv);
    const pagi_tls_info *t = tls_info_get(i);
    ck_assert_uint_eq(t->client_cert_count, 1);
    ck_assert_str_eq(t->client_cert_name, "CN=mallory");
    ck_assert_ptr_nonnull(t->client_cert_error);
    ck_assert_str_eq(t->client_cert_error,
                     X509_verify_cert_error_string(SSL_get_verify_result(p.srv)));
    tls_info_conn_gone(i);
    pair_free(&p);
}
END_TEST

START_TEST(server_pem_is_made_once_per_worker)
{
    pair p = handshake(NULL, NULL, 0), q = handshake(&alice, NULL, 1);
    tls_info *i = tls_info_new(p.srv), *j = tls_info_new(q.srv);
    const pagi_tls_info *a = tls_info_get(i), *b = tls_info_get(j);
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_eq(a->server_cert, b->server_cert); /* one PEM for both */
    tls_info_conn_gone(i);
    pair_free(&p);
    char *want = pem(server.cert);
    ck_assert_str_eq(b->server_cert, want); /* still there after the other went */
    free(want);
    tls_info_conn_gone(j);
    pair_free(&q);
}
END_TEST

START_TEST(facts_outlive_the_session)
{
    pair p = handshake(&alice, NULL, 0);
    tls_info *i = tls_info_new(p.srv);
    tls_info_ref(i); /* a scope's */
    /* Nobody asked yet: the connection's end makes them, then forgets the session. */
    tls_info_conn_gone(i);
    char *want = pem(alice.cert);
    pair_free(&p);
    const pagi_tls_info *t = tls_info_get(i);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(t->client_cert_chain[0], want);
    ck_assert_int_eq(t->tls_version, 0x0304);
    free(want);
    tls_info_unref(i);
}
END_TEST

START_TEST(unasked_alone_is_freed_without_facts)
{
    pair p = handshake(&alice, NULL, 0);
    tls_info *i = tls_info_new(p.srv);
    tls_info_ref(i);
    tls_info_unref(i);     /* the scope went first */
    tls_info_conn_gone(i); /* freed; ASan would see a leak or a late read */
    tls_info_conn_gone(NULL);
    tls_info_unref(NULL);
    pair_free(&p);
}
END_TEST

/* ---- pagi_scope_tls on scopes ---- */

static pagid_config cfg;
static struct ev_loop *ev;
static worker_ctx w;

static void scope_setup(void)
{
    config_init_defaults(&cfg);
    memset(&w, 0, sizeof w);
    w.cfg = &cfg;
    ev = ev_loop_new(0);
    loop_init(&w.loop, ev);
}

static void scope_teardown(void)
{
    loop_drain_all(&w.loop);
    loop_destroy(&w.loop);
    ev_loop_destroy(ev);
    config_free(&cfg);
}

static int no_send(pagi_scope *s, const pagi_event *e, pagi_send_cb cb, void *ud)
{
    (void)e;
    (void)cb;
    (void)ud;
    return scope_fail(s, "no sends here");
}

static int no_event(pagi_scope *s, pagi_event *e, int take)
{
    (void)s;
    (void)e;
    (void)take;
    return 0;
}

static void nothing(pagi_scope *s)
{
    (void)s;
}
static void finished(pagi_scope *s, const char *e)
{
    (void)s;
    (void)e;
}
static size_t none(const pagi_scope *s)
{
    (void)s;
    return 0;
}
static int not_high(const pagi_scope *s)
{
    (void)s;
    return 0;
}

static const scope_ops ops = {no_send, no_event, nothing, finished, none, not_high, NULL};

static pagi_scope *new_scope(tls_info *i)
{
    scope_request r = {.method = "GET",
                       .http_version = "1.1",
                       .scheme = i ? "https" : "http",
                       .path = {"/", 1},
                       .raw_path = {"/", 1},
                       .query = {"", 0},
                       .tls = i};
    pagi_scope *s = scope_new(&w, PAGI_SCOPE_HTTP, &ops, NULL, &r);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void end_scope(pagi_scope *s)
{
    scope_detach(s);
    pagi_scope_finish(s, NULL);
    runq_drain(&w.loop.rq);
}

START_TEST(scopes_share_the_facts_and_keep_them)
{
    pair p = handshake(&alice, NULL, 0);
    tls_info *i = tls_info_new(p.srv);
    pagi_scope *a = new_scope(i), *b = new_scope(i);
    ck_assert_int_eq(pagi_scope_has_extension(a, "tls"), 1);
    const pagi_tls_info *t = pagi_scope_tls(a);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(pagi_scope_tls(b), t);
    end_scope(a);
    /* The connection ends while b still runs: b's facts stay. */
    tls_info_conn_gone(i);
    pair_free(&p);
    ck_assert_ptr_eq(pagi_scope_tls(b), t);
    ck_assert_str_eq(t->client_cert_name, "CN=Alice Müller,O=Acme\\, Inc.,C=FR");
    end_scope(b); /* the last holder: freed (ASan checks) */
}
END_TEST

START_TEST(cleartext_scope_has_no_tls)
{
    pagi_scope *s = new_scope(NULL);
    ck_assert_int_eq(pagi_scope_has_extension(s, "tls"), 0);
    ck_assert_ptr_null(pagi_scope_tls(s));
    end_scope(s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tls_info");
    TCase *t = tcase_create("facts");
    tcase_add_unchecked_fixture(t, make_pki, free_pki);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, facts_of_a_mutual_tls13_session);
    tcase_add_test(t, no_client_certificate_tls12);
    tcase_add_test(t, untrusted_client_certificate_has_an_error);
    tcase_add_test(t, server_pem_is_made_once_per_worker);
    tcase_add_test(t, facts_outlive_the_session);
    tcase_add_test(t, unasked_alone_is_freed_without_facts);
    suite_add_tcase(s, t);
    t = tcase_create("scope");
    tcase_add_unchecked_fixture(t, make_pki, free_pki);
    tcase_add_checked_fixture(t, scope_setup, scope_teardown);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, scopes_share_the_facts_and_keep_them);
    tcase_add_test(t, cleartext_scope_has_no_tls);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * test_config_yaml_tls.c - Check suite for src/common/config_yaml_tls.c: a
 * listen entry's tls: mapping loads into pagid_tls (default certificate
 * first, SNI certificates after it, protocols in normal form, ticket key
 * files, groups in OpenSSL's names), the top-level tls: defaults, and every
 * mistake prints exactly "FILE:LINE:COLUMN: message".
 * Nothing here reads the files: that is tls_server's job.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "config_load_check.h"


#define HEAD "listen:\n  - address: 127.0.0.1:8443\n    tls:\n"

START_TEST(test_tls_minimal_defaults)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, HEAD "      cert: c.pem\n      key: k.pem\n"), 0);
    ck_assert_str_eq(out_text, "");
    ck_assert_uint_eq(c.n_listens, 1);
    const pagid_tls *t = c.listens[0].tls;
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->n_certs, 1);
    ck_assert_str_eq(t->certs[0].cert, "c.pem");
    ck_assert_str_eq(t->certs[0].key, "k.pem");
    ck_assert_uint_eq(t->certs[0].pos.line, 4);
    ck_assert_uint_eq(t->certs[0].pos.col, 13);
    ck_assert_uint_eq(t->certs[0].key_pos.line, 5);
    ck_assert_uint_eq(t->certs[0].key_pos.col, 12);
    ck_assert_ptr_null(t->protocols);
    ck_assert_ptr_null(t->ciphers);
    ck_assert_ptr_null(t->ciphersuites);
    ck_assert_int_eq(t->client_auth, TLS_CLIENT_NONE);
    ck_assert_ptr_null(t->client_crl);
    ck_assert_int_eq(t->verify_depth, -1);
    ck_assert_ptr_null(t->certs[0].ocsp);
    ck_assert_int_eq(t->session_tickets, 1);
    ck_assert_uint_eq(t->n_ticket_keys, 0);
    config_free(&c);
}
END_TEST

START_TEST(test_tls_full)
{
    pagid_config c;
    int n = load(&c, HEAD "      cert: d.pem\n      key: d.key\n"
                          "      certificates:\n"
                          "        - {cert: a.pem, key: a.key, ocsp: a.der}\n"
                          "        - cert: w.pem\n          key: w.key\n"
                          "      protocols: [TLSv1.3, TLSv1.2]\n"
                          "      ciphers: ECDHE-RSA-AES128-GCM-SHA256\n"
                          "      ciphersuites: TLS_AES_128_GCM_SHA256\n"
                          "      client_auth: {ca: ca.pem, mode: optional, crl: r.crl, "
                          "verify_depth: 2}\n"
                          "      session_tickets: yes\n"
                          "      session_ticket_key: [t1.key, t2.key]\n"
                          "      ocsp: d.der\n");
    ck_assert_str_eq(out_text, "");
    ck_assert_int_eq(n, 0);
    const pagid_tls *t = c.listens[0].tls;
    ck_assert_uint_eq(t->n_certs, 3);
    ck_assert_str_eq(t->certs[0].cert, "d.pem");
    ck_assert_str_eq(t->certs[1].key, "a.key");
    ck_assert_str_eq(t->certs[2].cert, "w.pem");
    ck_assert_uint_eq(t->certs[2].pos.line, 8);
    ck_assert_uint_eq(t->certs[2].key_pos.line, 9);
    ck_assert_uint_eq(t->certs[2].key_pos.col, 16);
    ck_assert_uint_eq(t->certs[1].key_pos.line, 7);
    ck_assert_str_eq(t->protocols, "TLSv1.2 TLSv1.3");
    ck_assert_str_eq(t->ciphers, "ECDHE-RSA-AES128-GCM-SHA256");
    ck_assert_str_eq(t->ciphersuites, "TLS_AES_128_GCM_SHA256");
    ck_assert_int_eq(t->client_auth, TLS_CLIENT_OPTIONAL);
    ck_assert_str_eq(t->client_ca, "ca.pem");
    ck_assert_str_eq(t->client_crl, "r.crl");
    ck_assert_uint_eq(t->client_crl_pos.line, 13);
    ck_assert_int_eq(t->verify_depth, 2);
    ck_assert_str_eq(t->certs[0].ocsp, "d.der");
    ck_assert_uint_eq(t->certs[0].ocsp_pos.line, 16);
    ck_assert_uint_eq(t->certs[0].ocsp_pos.col, 13);
    ck_assert_str_eq(t->certs[1].ocsp, "a.der");
    ck_assert_ptr_null(t->certs[2].ocsp);
    ck_assert_uint_eq(t->n_ticket_keys, 2);
    ck_assert_str_eq(t->ticket_keys[1], "t2.key");
    config_free(&c);
}
END_TEST

START_TEST(test_tls_forms)
{
    pagid_config c;
    /* certificates alone: the first is the default. */
    ck_assert_int_eq(load(&c, HEAD "      certificates: [{cert: a.pem, key: a.key}]\n"
                                   "      protocols: TLSv1.3\n"
                                   "      session_tickets: false\n"),
                     0);
    const pagid_tls *t = c.listens[0].tls;
    ck_assert_uint_eq(t->n_certs, 1);
    ck_assert_str_eq(t->certs[0].cert, "a.pem");
    ck_assert_str_eq(t->protocols, "TLSv1.3");
    ck_assert_int_eq(t->session_tickets, 0);
    config_free(&c);
    /* One ticket key file as a scalar; client_auth none needs no CA. */
    ck_assert_int_eq(load(&c, HEAD "      cert: c\n      key: k\n"
                                   "      session_ticket_key: t.key\n"
                                   "      client_auth: {mode: none}\n"),
                     0);
    t = c.listens[0].tls;
    ck_assert_uint_eq(t->n_ticket_keys, 1);
    ck_assert_str_eq(t->ticket_keys[0], "t.key");
    ck_assert_int_eq(t->client_auth, TLS_CLIENT_NONE);
    config_free(&c);
    /* A plain listen entry has no tls. */
    ck_assert_int_eq(load(&c, "listen: [127.0.0.1:80]\n"), 0);
    ck_assert_ptr_null(c.listens[0].tls);
    config_free(&c);
}
END_TEST

START_TEST(test_tls_errors)
{
    expect_error(HEAD "      cert: c\n      key: k\n      certs: x\n",
                 "t.yaml:6:7: unknown key 'certs' in 'listen.tls' (did you mean 'cert'?)");
    expect_error(HEAD "      cert: c\n      key: k\n      cipher: x\n",
                 "t.yaml:6:7: unknown key 'cipher' in 'listen.tls' (did you mean 'ciphers'?)");
    expect_error(HEAD "      cert: c\n      key: k\n      session_ticket: true\n",
                 "t.yaml:6:7: unknown key 'session_ticket' in 'listen.tls' (did you mean "
                 "'session_tickets'?)");
    expect_error(HEAD "      key: k\n",
                 "t.yaml:4:7: 'listen.tls' needs both 'cert' and 'key' (PEM files): 'cert' is "
                 "missing");
    expect_error(HEAD "      protocols: [TLSv1.3]\n",
                 "t.yaml:4:7: 'listen.tls' needs both 'cert' and 'key' (PEM files), or "
                 "'certificates'");
    expect_error(HEAD "      cert: c\n      key: ''\n", "t.yaml:5:12: 'listen.tls.key' is empty");
    expect_error(HEAD "      cert: c\n      key: k\n      client_auth: {ca: a, verify_depth: 1.5}\n",
                 "t.yaml:6:42: invalid verify_depth '1.5' (expected 0 to 100: the intermediate CAs "
                 "allowed between a client's certificate and the CA)");
    expect_error(HEAD "      cert: c\n      key: k\n      client_auth: {ca: a, crl: ''}\n",
                 "t.yaml:6:33: 'listen.tls.client_auth.crl' is empty");
    expect_error(HEAD "      certificates: [{cert: c, key: k, oscp: o}]\n",
                 "t.yaml:4:40: unknown key 'oscp' in 'listen.tls.certificates' (did you mean "
                 "'ocsp'?)");
    expect_error(HEAD "      cert: c\n      key: k\n      protocols: [TLSv1.2, SSLv3]\n",
                 "t.yaml:6:28: protocol 'SSLv3' is not supported: it is insecure (pagid offers "
                 "TLSv1.2 and TLSv1.3)");
    expect_error(HEAD "      cert: c\n      key: k\n      protocols: tlsv1\n",
                 "t.yaml:6:18: protocol 'tlsv1' is not supported: it is insecure (pagid offers "
                 "TLSv1.2 and TLSv1.3)");
    expect_error(HEAD "      cert: c\n      key: k\n      protocols: [TLS1.3]\n",
                 "t.yaml:6:19: unknown protocol 'TLS1.3' in 'listen.tls.protocols' (did you "
                 "mean 'TLSv1.3'?)");
    expect_error(HEAD "      cert: c\n      key: k\n      protocols: [http]\n",
                 "t.yaml:6:19: unknown protocol 'http' in 'listen.tls.protocols' (expected "
                 "TLSv1.2 or TLSv1.3)");
    expect_error(HEAD "      cert: c\n      key: k\n      protocols: \"TLSv1.2 TLSv1.3\"\n",
                 "t.yaml:6:18: 'listen.tls.protocols' is one string 'TLSv1.2 TLSv1.3': write a "
                 "list, protocols: [TLSv1.2, TLSv1.3]");
    expect_error(HEAD "      cert: c\n      key: k\n      protocols: []\n",
                 "t.yaml:6:18: 'listen.tls.protocols' is empty: name TLSv1.2, TLSv1.3 or both");
    expect_error(HEAD "      cert: c\n      key: k\n      certificates: []\n",
                 "t.yaml:6:21: 'listen.tls.certificates' is empty");
    expect_error(HEAD "      cert: c\n      key: k\n      certificates: [{cert: a, kye: b}]\n",
                 "t.yaml:6:32: unknown key 'kye' in 'listen.tls.certificates' (did you mean "
                 "'key'?)");
    expect_error(HEAD "      cert: c\n      key: k\n      certificates: [{key: b}]\n",
                 "t.yaml:6:22: 'listen.tls.certificates' needs both 'cert' and 'key' (PEM "
                 "files): 'cert' is missing");
    expect_error(HEAD "      cert: c\n      key: k\n      session_tickets: sometimes\n",
                 "t.yaml:6:24: 'listen.tls.session_tickets' must be true or false, not "
                 "'sometimes'");
    expect_error(HEAD "      cert: c\n      key: k\n      session_tickets: false\n"
                      "      session_ticket_key: t\n",
                 "t.yaml:7:7: 'listen.tls.session_ticket_key' given with session_tickets: false");
    expect_error(HEAD "      cert: c\n      key: k\n      session_ticket_key: {a: b}\n",
                 "t.yaml:6:27: 'listen.tls.session_ticket_key' must be a file or a list of "
                 "files, not a mapping");
    expect_error(HEAD "      cert: c\n      key: k\n      ciphers: ''\n",
                 "t.yaml:6:16: 'listen.tls.ciphers' is empty");
    expect_error(HEAD "      cert: c\n      key: k\n      client_auth: {mode: require}\n",
                 "t.yaml:6:20: 'listen.tls.client_auth' needs a 'ca' file to verify clients "
                 "against");
    expect_error("listen:\n  - address: 127.0.0.1:8443\n    tls: [c, k]\n",
                 "t.yaml:3:10: 'listen.tls' must be a mapping, not a list");
}
END_TEST

/* groups: any spelling, case aside, becomes OpenSSL's name, in the order
 * given; unset (NULL) means tls.groups, then the built-in default. */
START_TEST(test_tls_groups)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, HEAD "      cert: c\n      key: k\n"
                                   "      groups: [p-384, x25519, Secp256R1, FFDHE2048, x448, "
                                   "P-521]\n"
                                   "  - address: 127.0.0.1:8444\n"
                                   "    tls: {cert: c, key: k, groups: prime256v1}\n"
                                   "  - address: 127.0.0.1:8445\n"
                                   "    tls: {cert: c, key: k}\n"),
                     0);
    ck_assert_str_eq(out_text, "");
    ck_assert_str_eq(c.listens[0].tls->groups,
                     "secp384r1:X25519:prime256v1:ffdhe2048:X448:secp521r1");
    ck_assert_uint_eq(c.listens[0].tls->groups_pos.line, 6);
    ck_assert_uint_eq(c.listens[0].tls->groups_pos.col, 15);
    ck_assert_str_eq(c.listens[1].tls->groups, "prime256v1");
    ck_assert_ptr_null(c.listens[2].tls->groups);
    ck_assert_ptr_null(c.tls_groups);
    config_free(&c);
    /* The top-level default, before or after the listeners. */
    ck_assert_int_eq(load(&c, "tls:\n  groups: [P-256]\n" HEAD "      cert: c\n      key: k\n"), 0);
    ck_assert_str_eq(c.tls_groups, "prime256v1");
    ck_assert_uint_eq(c.tls_groups_pos.line, 2);
    ck_assert_uint_eq(c.tls_groups_pos.col, 11);
    ck_assert_ptr_null(c.listens[0].tls->groups);
    config_free(&c);
    ck_assert_int_eq(load(&c, "tls: {groups: [X25519, P-384]}\n"), 0);
    ck_assert_str_eq(c.tls_groups, "X25519:secp384r1");
    config_free(&c);
    /* An empty tls: section sets nothing. */
    ck_assert_int_eq(load(&c, "tls:\n"), 0);
    ck_assert_ptr_null(c.tls_groups);
    config_free(&c);
}
END_TEST

START_TEST(test_tls_groups_errors)
{
#define VALID                                                                                      \
    "valid: X25519, prime256v1, secp384r1, secp521r1, X448, ffdhe2048, ffdhe3072, ffdhe4096, "     \
    "ffdhe6144, ffdhe8192)"
    expect_error(HEAD "      cert: c\n      key: k\n      groups: [X25519, brainpoolP256r1]\n",
                 "t.yaml:6:24: unknown TLS group 'brainpoolP256r1' in 'listen.tls.groups' (" VALID);
    expect_error(HEAD "      cert: c\n      key: k\n      groups: [X2519]\n",
                 "t.yaml:6:16: unknown TLS group 'X2519' in 'listen.tls.groups' (" VALID);
    expect_error("tls:\n  groups: [P-256, sect571r1]\n",
                 "t.yaml:2:19: unknown TLS group 'sect571r1' in 'tls.groups' (" VALID);
    expect_error(HEAD "      cert: c\n      key: k\n      groups: []\n",
                 "t.yaml:6:15: 'listen.tls.groups' is empty: name at least one group (the "
                 "default is X25519, P-256, P-384)");
    expect_error("tls:\n  groups:\n",
                 "t.yaml:2:10: 'tls.groups' is empty: name at least one group (the default is "
                 "X25519, P-256, P-384)");
    expect_error(HEAD "      cert: c\n      key: k\n      groups: X25519:prime256v1\n",
                 "t.yaml:6:15: 'listen.tls.groups' is one string 'X25519:prime256v1': write a "
                 "list, groups: [X25519, P-256]");
    expect_error(HEAD "      cert: c\n      key: k\n      groups: {X25519: 1}\n",
                 "t.yaml:6:15: 'listen.tls.groups' must be a list of key exchange groups (e.g. "
                 "[X25519, P-256]), not a mapping");
    expect_error(HEAD "      cert: c\n      key: k\n      groups: [prime256v1, P-256]\n",
                 "t.yaml:6:28: TLS group 'P-256' is named twice in 'listen.tls.groups' (another "
                 "name for prime256v1)");
    expect_error(HEAD "      cert: c\n      key: k\n      groups: [X25519, x25519]\n",
                 "t.yaml:6:24: TLS group 'x25519' is named twice in 'listen.tls.groups'");
    expect_error(HEAD "      cert: c\n      key: k\n      group: [X25519]\n",
                 "t.yaml:6:7: unknown key 'group' in 'listen.tls' (did you mean 'groups'?)");
    expect_error("tls:\n  curves: [X25519]\n", "t.yaml:2:3: unknown key 'curves' in 'tls'");
    expect_error("tls: [X25519]\n", "t.yaml:1:6: 'tls' must be a mapping, not a list");
    expect_error("tls: {groups: [X25519]}\ntls: {groups: [P-256]}\n",
                 "t.yaml:2:1: duplicate key 'tls' (first set at t.yaml:1:1)");
#undef VALID
}
END_TEST

/* listen.http2: on by default with TLS, off in clear unless prior-knowledge. */
START_TEST(test_listen_http2)
{
    pagid_config c;
    ck_assert_int_eq(load(&c, HEAD "      cert: c\n      key: k\n"
                                   "  - 127.0.0.1:80\n"
                                   "  - {address: 127.0.0.1:81, http2: prior-knowledge}\n"
                                   "  - {address: 127.0.0.1:82, http2: false, tls: {cert: c, "
                                   "key: k}}\n"),
                     0);
    ck_assert_str_eq(out_text, "");
    ck_assert_uint_eq(c.n_listens, 4);
    ck_assert_int_eq(config_listen_h2(&c.listens[0]), 1);
    ck_assert_int_eq(config_listen_h2(&c.listens[1]), 0);
    ck_assert_int_eq(config_listen_h2(&c.listens[2]), 1);
    ck_assert_int_eq(c.listens[2].http2, PAGID_H2_PRIOR_KNOWLEDGE);
    ck_assert_int_eq(config_listen_h2(&c.listens[3]), 0);
    config_free(&c);
    expect_error("listen:\n  - {address: 127.0.0.1:80, http2: true}\n",
                 "t.yaml:2:36: 'listen.http2: true' needs TLS (ALPN h2); on a cleartext "
                 "listener write 'http2: prior-knowledge' for h2c");
    expect_error("listen:\n  - {address: 127.0.0.1:80, http2: h2c}\n",
                 "t.yaml:2:36: 'listen.http2' must be true, false or prior-knowledge, not 'h2c'");
    expect_error(HEAD "      cert: c\n      key: k\n    http2: prior-knowledge\n",
                 "t.yaml:6:12: 'listen.http2: prior-knowledge' is for cleartext listeners; a "
                 "TLS listener offers h2 by ALPN (http2: true, the default)");
}
END_TEST

/* Every prefix of a full mapping: an error or a load, never a crash or leak. */
START_TEST(test_tls_truncations_never_crash)
{
    static const char full[] = HEAD "      cert: d.pem\n      key: d.key\n"
                                    "      certificates: [{cert: a.pem, key: a.key}]\n"
                                    "      protocols: [TLSv1.2, TLSv1.3]\n"
                                    "      session_ticket_key: [t1, t2]\n"
                                    "      client_auth: {ca: ca.pem, mode: optional}\n"
                                    "      groups: [X25519, P-256, ffdhe2048]\n"
                                    "tls: {groups: [P-384, x448]}\n";
    char buf[sizeof full];
    for (size_t len = 0; len < sizeof full; len++) {
        memcpy(buf, full, len);
        buf[len] = '\0';
        pagid_config c;
        load(&c, buf);
        config_free(&c);
    }
}
END_TEST

static Suite *config_yaml_tls_suite(void)
{
    Suite *s = suite_create("config_yaml_tls");
    TCase *tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_tls_minimal_defaults);
    tcase_add_test(tc, test_tls_full);
    tcase_add_test(tc, test_tls_forms);
    tcase_add_test(tc, test_tls_errors);
    tcase_add_test(tc, test_tls_groups);
    tcase_add_test(tc, test_tls_groups_errors);
    tcase_add_test(tc, test_listen_http2);
    tcase_add_test(tc, test_tls_truncations_never_crash);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_yaml_tls_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * tls_test_cert.h - a throwaway TLS server for tests and the fuzz harness: a
 * fresh self-signed P-256 certificate written to a temporary directory and a
 * tls_server built from it through the config loader, as pagid builds one.
 */
#ifndef PAGID_TLS_TEST_CERT_H
#define PAGID_TLS_TEST_CERT_H

#include <stddef.h>

struct tls_server;

/**
 * Make a key and a self-signed certificate (CN=localhost) in a new
 * directory under TMPDIR and build a server context from them with
 * tls_server_new; extra_yaml (NULL or lines such as "ciphers: X") goes into
 * the tls mapping. dir (PATH_MAX bytes) gets the directory, removed by
 * tls_test_cleanup. NULL on failure, after printing why.
 */
struct tls_server *tls_test_server(const char *extra_yaml, char *dir);
/** Remove the files and the directory made by tls_test_server. */
void tls_test_cleanup(const char *dir);

#endif

/*
 * tls_test_cert.c - see tls_test_cert.h. The key is made afresh on each run
 * (no private key lives in the repository) and is only ever used on a
 * socketpair inside the test process.
 */
#include "tls_test_cert.h"

#include <limits.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/tls_server.h"

static int write_pem(const char *path, EVP_PKEY *key, X509 *cert)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok =
        key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, cert);
    return (fclose(f) == 0 && ok == 1) ? 0 : -1;
}

static int make_cert(const char *cert_path, const char *key_path)
{
    int rc = -1;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    if (!key || !x)
        goto out;
    X509_NAME *name = X509_get_subject_name(x);
    if (X509_set_version(x, 2) != 1 || ASN1_INTEGER_set(X509_get_serialNumber(x), 1) != 1 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), 86400) || X509_set_pubkey(x, key) != 1 ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
                                   -1, 0) != 1 ||
        X509_set_issuer_name(x, name) != 1 || X509_sign(x, key, EVP_sha256()) <= 0)
        goto out;
    if (write_pem(cert_path, NULL, x) == 0 && write_pem(key_path, key, NULL) == 0)
        rc = 0;
out:
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

struct tls_server *tls_test_server(const char *extra_yaml, char *dir)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, PATH_MAX, "%s/pagid-tls-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("tls_test_server: mkdtemp");
        return NULL;
    }
    char cert[PATH_MAX + 16], key[PATH_MAX + 16];
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    if (make_cert(cert, key) < 0) {
        fprintf(stderr, "tls_test_server: cannot make a test certificate\n");
        return NULL;
    }
    char *yaml = NULL;
    size_t ylen = 0;
    FILE *y = open_memstream(&yaml, &ylen);
    if (!y)
        return NULL;
    fprintf(y, "listen:\n  - address: 127.0.0.1:1\n    tls:\n      cert: %s\n      key: %s\n", cert,
            key);
    if (extra_yaml)
        fprintf(y, "      %s\n", extra_yaml);
    fclose(y);
    pagid_config c;
    config_init_defaults(&c);
    struct tls_server *ts = NULL;
    if (config_load_string(&c, yaml, "tls-test.yaml", stderr) == 0 && c.n_listens == 1 &&
        c.listens[0].tls)
        ts = tls_server_new(&c, &c.listens[0], stderr);
    else
        fprintf(stderr, "tls_test_server: the config did not load:\n%s", yaml);
    config_free(&c);
    free(yaml);
    return ts;
}

void tls_test_cleanup(const char *dir)
{
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/cert.pem", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/key.pem", dir);
    unlink(p);
    rmdir(dir);
}

/*
 * tls_tickets.c - session ticket keys. A ticket is the client's copy of its
 * session, encrypted by the server; any worker must decrypt what another
 * encrypted. Files: nginx's ssl_session_ticket_key format (48 bytes: name,
 * AES-128 key, HMAC key; 80 bytes: name, HMAC key, AES-256 key). Without
 * files: the master makes one random secret per process (before it forks
 * anything, so every worker and every later generation has it), and each
 * hour's key is HKDF(secret, hour number); the current hour's key encrypts,
 * the previous hour's still decrypts (and asks for a fresh ticket).
 */
#include "tls_tickets.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct ticket_key {
    unsigned char name[16];
    unsigned char hmac[32];
    unsigned char aes[32];
    size_t hmac_len;
    const EVP_CIPHER *cipher;
} ticket_key;

struct tls_tickets {
    ticket_key *keys; /* keys[0] encrypts */
    size_t n;
    int derived;     /* keys follow the clock (2 of them) */
    long long epoch; /* derived: the hour keys[0] belongs to */
    /* derived: the listener's identity, in the HKDF info, so one
     * listener's tickets do not even decrypt on another */
    unsigned char id[TLS_TICKET_ID_LEN];
};

/* The master's secret for derived keys: made once, inherited by fork. */
static unsigned char secret[32];
static int have_secret;
static int ex_index = -1;

static int derive(const tls_tickets *tk, long long epoch, ticket_key *k)
{
    unsigned char out[80], info[20 + 8 + TLS_TICKET_ID_LEN] = "pagid ticket key";
    for (int i = 0; i < 8; i++)
        info[20 + i] = (unsigned char)((unsigned long long)epoch >> (56 - 8 * i));
    memcpy(info + 28, tk->id, sizeof tk->id);
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (!kctx)
        return -1;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, secret, sizeof secret),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof info),
        OSSL_PARAM_construct_end(),
    };
    int ok = EVP_KDF_derive(kctx, out, sizeof out, params) == 1;
    EVP_KDF_CTX_free(kctx);
    if (ok) {
        memcpy(k->name, out, 16);
        memcpy(k->hmac, out + 16, 32);
        memcpy(k->aes, out + 48, 32);
        k->hmac_len = 32;
        k->cipher = EVP_aes_256_cbc();
    }
    OPENSSL_cleanse(out, sizeof out);
    return ok ? 0 : -1;
}

static long long (*clock_now)(void);

void tls_tickets_set_clock(long long (*now)(void))
{
    clock_now = now;
}

/* Derived keys: follow the clock. A worker that cannot derive keeps its
 * last keys (tickets it made still work); 0 or -1. */
static int refresh(tls_tickets *tk)
{
    long long now = (clock_now ? clock_now() : (long long)time(NULL)) / TLS_TICKET_ROTATE_SECONDS;
    if (!tk->derived || now == tk->epoch)
        return 0;
    ticket_key cur, prev;
    if (derive(tk, now, &cur) < 0 || derive(tk, now - 1, &prev) < 0)
        return -1;
    tk->keys[0] = cur;
    tk->keys[1] = prev;
    tk->epoch = now;
    OPENSSL_cleanse(&cur, sizeof cur);
    OPENSSL_cleanse(&prev, sizeof prev);
    return 0;
}

static int set_mac_key(EVP_MAC_CTX *hctx, const ticket_key *k)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac, k->hmac_len),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    return EVP_MAC_CTX_set_params(hctx, params) == 1 ? 0 : -1;
}

/* OpenSSL's contract: 1 = done (or decrypted, no new ticket needed), 2 =
 * decrypted but issue a new ticket, 0 = unknown key (full handshake),
 * -1 = error. */
static int ticket_cb(SSL *s, unsigned char key_name[16], unsigned char iv[EVP_MAX_IV_LENGTH],
                     EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
    tls_tickets *tk = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), ex_index);
    if (!tk)
        return enc ? -1 : 0;
    refresh(tk);
    if (enc) {
        const ticket_key *k = &tk->keys[0];
        int ivlen = EVP_CIPHER_get_iv_length(k->cipher);
        if (ivlen <= 0 || RAND_bytes(iv, ivlen) != 1)
            return -1;
        memcpy(key_name, k->name, 16);
        if (EVP_EncryptInit_ex(cctx, k->cipher, NULL, k->aes, iv) != 1 || set_mac_key(hctx, k) < 0)
            return -1;
        return 1;
    }
    for (size_t i = 0; i < tk->n; i++) {
        const ticket_key *k = &tk->keys[i];
        if (memcmp(key_name, k->name, 16))
            continue;
        if (set_mac_key(hctx, k) < 0 || EVP_DecryptInit_ex(cctx, k->cipher, NULL, k->aes, iv) != 1)
            return -1;
        /* TLS 1.3 clients use a ticket once (RFC 8446 C.4; OpenSSL's
         * client marks a resumed session spent): without a fresh ticket
         * after each resumption, every other connection is a full
         * handshake. TLS 1.2 renews only what an old key sealed. */
        return i == 0 && SSL_version(s) != TLS1_3_VERSION ? 1 : 2;
    }
    return 0;
}

/* One nginx-format key file into k; 0, or -1 after reporting. */
static int read_key_file(const pagid_config *c, const pagid_tls *t, const char *file, ticket_key *k,
                         FILE *err)
{
    unsigned char buf[81];
    FILE *f = fopen(file, "rbe");
    if (!f) {
        config_report(c, t->ticket_keys_pos, err, "cannot read session ticket key '%s': %s", file,
                      strerror(errno));
        return -1;
    }
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int rc = 0;
    if (got == 48) {
        memcpy(k->name, buf, 16);
        memcpy(k->aes, buf + 16, 16);
        memcpy(k->hmac, buf + 32, 16);
        k->hmac_len = 16;
        k->cipher = EVP_aes_128_cbc();
    } else if (got == 80) {
        memcpy(k->name, buf, 16);
        memcpy(k->hmac, buf + 16, 32);
        memcpy(k->aes, buf + 48, 32);
        k->hmac_len = 32;
        k->cipher = EVP_aes_256_cbc();
    } else {
        config_report(c, t->ticket_keys_pos, err,
                      "session ticket key '%s' must be 48 or 80 bytes (openssl rand 80 > FILE), "
                      "not %s%zu",
                      file, got == sizeof buf ? "more than " : "",
                      got == sizeof buf ? got - 1 : got);
        rc = -1;
    }
    OPENSSL_cleanse(buf, sizeof buf);
    return rc;
}

tls_tickets *tls_tickets_new(const pagid_config *c, const pagid_tls *t, FILE *err)
{
    tls_tickets *tk = calloc(1, sizeof *tk);
    size_t n = t->n_ticket_keys ? t->n_ticket_keys : 2;
    if (!tk || !(tk->keys = OPENSSL_secure_zalloc(n * sizeof *tk->keys))) {
        free(tk);
        config_report(c, t->pos, err, "cannot set up session tickets: out of memory");
        return NULL;
    }
    tk->n = n;
    if (ex_index < 0)
        ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    if (t->n_ticket_keys) {
        int bad = 0;
        for (size_t i = 0; i < n; i++)
            if (read_key_file(c, t, t->ticket_keys[i], &tk->keys[i], err) < 0)
                bad = 1;
        if (bad) {
            tls_tickets_free(tk);
            return NULL;
        }
        return tk;
    }
    if (!have_secret) {
        if (RAND_bytes(secret, sizeof secret) != 1) {
            config_report(c, t->pos, err, "cannot make session ticket keys: no randomness");
            tls_tickets_free(tk);
            return NULL;
        }
        have_secret = 1;
    }
    tk->derived = 1;
    tk->epoch = -1;
    if (ex_index < 0 || refresh(tk) < 0) {
        config_report(c, t->pos, err, "cannot make session ticket keys (HKDF)");
        tls_tickets_free(tk);
        return NULL;
    }
    return tk;
}

int tls_tickets_bind(tls_tickets *tk, const unsigned char id[TLS_TICKET_ID_LEN])
{
    if (!tk->derived)
        return 0;
    memcpy(tk->id, id, sizeof tk->id);
    tk->epoch = -1;
    return refresh(tk);
}

int tls_tickets_attach(tls_tickets *tk, struct ssl_ctx_st *ctx)
{
    if (ex_index < 0 || SSL_CTX_set_ex_data(ctx, ex_index, tk) != 1)
        return -1;
    return SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb) == 1 ? 0 : -1;
}

void tls_tickets_free(tls_tickets *tk)
{
    if (!tk)
        return;
    OPENSSL_secure_clear_free(tk->keys, tk->n * sizeof *tk->keys);
    free(tk);
}

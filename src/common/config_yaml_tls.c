/*
 * config_yaml_tls.c - the `tls:` mapping of a listen entry: certificate and
 * key files, client certificates. Only the shape is checked here; the files
 * are read when the listeners open (tls_server.c), as root, and pagid -t
 * loads them the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "config_suggest.h"
#include "config_yaml_int.h"

/* A non-empty string value, copied; NULL after reporting. */
static char *tls_string(load_ctx *x, const ynode *n, const char *path)
{
    const char *s = scalar(x, n, path);
    if (!s)
        return NULL;
    if (!*s) {
        report(x, n, "'%s' is empty", path);
        return NULL;
    }
    char *copy = strdup(s);
    if (!copy)
        report(x, n, "out of memory");
    return copy;
}

/* Each key of mapping n must be one of names (NULL-terminated); vals[i]
 * gets the value of names[i]. 0, or -1 after reporting. */
static int tls_keys(load_ctx *x, const ynode *n, const char *what, const char *const *names,
                    const ynode **keys, const ynode **vals)
{
    char shown[80];
    int bad = 0;
    size_t count = 0;
    while (names[count])
        count++;
    if (n->type != YAML_MAPPING_NODE) {
        report(x, n, "'%s' must be a mapping, not %s", what, kind_name(n));
        return -1;
    }
    for (size_t p = 0; p < n->len; p++) {
        const ynode *key = key_at(x, n, p), *val = value_at(x, n, p);
        const char *name = scalar(x, key, what);
        if (!name) {
            bad = 1;
            continue;
        }
        size_t i = 0;
        while (i < count && strcmp(name, names[i]))
            i++;
        if (i == count) {
            const char *near = config_suggest_among(name, strlen(name), names);
            if (near)
                report(x, key, "unknown key '%s' in '%s' (did you mean '%s'?)",
                       printable(key, shown, sizeof shown), what, near);
            else
                report(x, key, "unknown key '%s' in '%s'", printable(key, shown, sizeof shown),
                       what);
            bad = 1;
        } else if (keys[i]) {
            report(x, key, "duplicate key '%s' in '%s'", names[i], what);
            bad = 1;
        } else {
            keys[i] = key;
            vals[i] = val;
        }
    }
    return bad ? -1 : 0;
}

/* client_auth: {ca: FILE, mode: none|optional|require} */
static int tls_client_auth_parse(load_ctx *x, const ynode *n, pagid_tls *t)
{
    static const char *const names[] = {"ca", "mode", NULL};
    const ynode *keys[2] = {NULL}, *vals[2] = {NULL};
    if (tls_keys(x, n, "listen.tls.client_auth", names, keys, vals) < 0)
        return -1;
    t->client_auth = TLS_CLIENT_REQUIRE;
    if (vals[1]) {
        const char *m = scalar(x, vals[1], "listen.tls.client_auth.mode");
        if (!m)
            return -1;
        if (!strcmp(m, "none"))
            t->client_auth = TLS_CLIENT_NONE;
        else if (!strcmp(m, "optional"))
            t->client_auth = TLS_CLIENT_OPTIONAL;
        else if (!strcmp(m, "require"))
            t->client_auth = TLS_CLIENT_REQUIRE;
        else {
            char shown[80];
            report(x, vals[1],
                   "invalid client_auth mode '%s' (expected none, optional or require)",
                   printable(vals[1], shown, sizeof shown));
            return -1;
        }
    }
    if (!vals[0]) {
        if (t->client_auth != TLS_CLIENT_NONE) {
            report(x, n, "'listen.tls.client_auth' needs a 'ca' file to verify clients against");
            return -1;
        }
        return 0;
    }
    if (!(t->client_ca = tls_string(x, vals[0], "listen.tls.client_auth.ca")))
        return -1;
    return 0;
}

int config_tls_parse(load_ctx *x, const ynode *n, pagid_tls **out)
{
    static const char *const names[] = {"cert", "key", "client_auth", NULL};
    enum { K_CERT, K_KEY, K_CLIENT_AUTH, K_COUNT };
    const ynode *keys[K_COUNT] = {NULL}, *vals[K_COUNT] = {NULL};
    *out = NULL;
    if (tls_keys(x, n, "listen.tls", names, keys, vals) < 0)
        return -1;
    if (!vals[K_CERT] || !vals[K_KEY]) {
        report(x, n, "'listen.tls' needs both 'cert' and 'key' (PEM files)");
        return -1;
    }
    pagid_tls *t = config_tls_new();
    if (!t) {
        report(x, n, "out of memory");
        return -1;
    }
    t->pos = keep_pos(x, n);
    int bad = 0;
    char *cert = tls_string(x, vals[K_CERT], "listen.tls.cert");
    char *key = tls_string(x, vals[K_KEY], "listen.tls.key");
    if (!cert || !key || config_tls_add_cert(t, cert, key, keep_pos(x, vals[K_CERT])) < 0)
        bad = 1;
    free(cert);
    free(key);
    if (vals[K_CLIENT_AUTH] && tls_client_auth_parse(x, vals[K_CLIENT_AUTH], t) < 0)
        bad = 1;
    if (bad) {
        config_tls_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

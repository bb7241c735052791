/*
 * config_yaml_tls.c - the `tls:` mapping of a listen entry: the default
 * certificate and the SNI ones, protocols, ciphers, key exchange groups,
 * client certificates, session tickets; and the top-level `tls:` defaults
 * (groups). Only the shape is checked here; the files are read when the
 * listeners open (tls_server.c), as root, and pagid -t loads them the same
 * way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
 * gets the value of names[i]. 0; -1 after reporting a bad key (the known
 * ones are still filled in, so the caller reports their problems too); -2
 * after reporting that n is not a mapping. */
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
        return -2;
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

/* verify_depth: 0..100 intermediate CAs between a client's certificate and
 * the trusted CA. 0, or -1 after reporting. */
static int tls_verify_depth_parse(load_ctx *x, const ynode *n, pagid_tls *t)
{
    const char *s = scalar(x, n, "listen.tls.client_auth.verify_depth");
    if (!s)
        return -1;
    char *end, shown[80];
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > 100) {
        report(x, n, "invalid verify_depth '%s' (expected 0 to 100: the intermediate CAs allowed "
                     "between a client's certificate and the CA)",
               printable(n, shown, sizeof shown));
        return -1;
    }
    t->verify_depth = (int)v;
    return 0;
}

/* client_auth: {ca: FILE, mode: none|optional|require, crl: FILE, verify_depth: N} */
static int tls_client_auth_parse(load_ctx *x, const ynode *n, pagid_tls *t)
{
    static const char *const names[] = {"ca", "mode", "crl", "verify_depth", NULL};
    const ynode *keys[4] = {NULL}, *vals[4] = {NULL};
    int rc = tls_keys(x, n, "listen.tls.client_auth", names, keys, vals);
    if (rc == -2)
        return -1;
    int bad = rc < 0;
    if (vals[3] && tls_verify_depth_parse(x, vals[3], t) < 0)
        bad = 1;
    if (vals[2]) {
        if (!(t->client_crl = tls_string(x, vals[2], "listen.tls.client_auth.crl")))
            return -1;
        t->client_crl_pos = keep_pos(x, vals[2]);
    }
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
            report(x, vals[1], "invalid client_auth mode '%s' (expected none, optional or require)",
                   printable(vals[1], shown, sizeof shown));
            return -1;
        }
    }
    if (!vals[0]) {
        if (t->client_auth != TLS_CLIENT_NONE && !bad) {
            report(x, n, "'listen.tls.client_auth' needs a 'ca' file to verify clients against");
            return -1;
        }
        return bad ? -1 : 0;
    }
    if (!(t->client_ca = tls_string(x, vals[0], "listen.tls.client_auth.ca")))
        return -1;
    t->client_ca_pos = keep_pos(x, vals[0]);
    return bad ? -1 : 0;
}

/* One {cert, key} pair (n is the mapping, or the tls mapping itself with
 * its own cert/key values); added to t. 0, or -1 after reporting. */
static int tls_pair_add(load_ctx *x, const ynode *at, const ynode *cert, const ynode *key,
                        const ynode *ocsp, const char *what, pagid_tls *t)
{
    if (!cert || !key) {
        report(x, at, "'%s' needs both 'cert' and 'key' (PEM files)%s", what,
               cert  ? ": 'key' is missing"
               : key ? ": 'cert' is missing"
                     : "");
        return -1;
    }
    char path[64];
    snprintf(path, sizeof path, "%s.cert", what);
    char *c = tls_string(x, cert, path);
    snprintf(path, sizeof path, "%s.key", what);
    char *k = tls_string(x, key, path);
    int rc = -1;
    if (c && k) {
        rc = config_tls_add_cert(t, c, k, keep_pos(x, cert));
        if (rc < 0)
            report(x, at, "out of memory");
        else
            t->certs[t->n_certs - 1].key_pos = keep_pos(x, key);
    }
    if (rc == 0 && ocsp) {
        pagid_tls_cert *pc = &t->certs[t->n_certs - 1];
        snprintf(path, sizeof path, "%s.ocsp", what);
        if (!(pc->ocsp = tls_string(x, ocsp, path)))
            rc = -1;
        pc->ocsp_pos = keep_pos(x, ocsp);
    }
    free(c);
    free(k);
    return rc;
}

/* certificates: [{cert: F, key: F}, ...], the ones SNI chooses from. */
static int tls_certificates_parse(load_ctx *x, const ynode *n, pagid_tls *t)
{
    static const char *const names[] = {"cert", "key", "ocsp", NULL};
    if (n->type != YAML_SEQUENCE_NODE) {
        report(x, n, "'listen.tls.certificates' must be a list of {cert, key} mappings, not %s",
               kind_name(n));
        return -1;
    }
    if (n->len == 0) {
        report(x, n, "'listen.tls.certificates' is empty");
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < n->len; i++) {
        const ynode *item = item_at(x, n, i);
        const ynode *keys[3] = {NULL}, *vals[3] = {NULL};
        int rc = tls_keys(x, item, "listen.tls.certificates", names, keys, vals);
        if (rc < 0)
            bad = 1;
        /* A typo'd key: its pair's other problems (if any) still show. */
        if (rc == 0 || (rc == -1 && vals[0] && vals[1]))
            if (tls_pair_add(x, item, vals[0], vals[1], vals[2], "listen.tls.certificates", t) < 0)
                bad = 1;
    }
    return bad ? -1 : 0;
}

/* protocols: [TLSv1.2, TLSv1.3] (or one name): the versions offered, kept
 * as "TLSv1.2 TLSv1.3" in that order. Older versions are refused: they are
 * broken (RFC 8996) and no client that needs them is worth weakening a
 * listener for. */
static int tls_protocols_parse(load_ctx *x, const ynode *n, pagid_tls *t)
{
    static const char *const known[] = {"TLSv1.2", "TLSv1.3", NULL};
    static const char *const old[] = {"SSLv2", "SSLv3", "TLSv1", "TLSv1.0", "TLSv1.1", NULL};
    int want[2] = {0, 0}, bad = 0;
    size_t count = n->type == YAML_SEQUENCE_NODE ? n->len : 1;
    if (n->type == YAML_MAPPING_NODE) {
        report(x, n, "'listen.tls.protocols' must be a list of versions (TLSv1.2, TLSv1.3), not %s",
               kind_name(n));
        return -1;
    }
    if (count == 0) {
        report(x, n, "'listen.tls.protocols' is empty: name TLSv1.2, TLSv1.3 or both");
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const ynode *v = n->type == YAML_SEQUENCE_NODE ? item_at(x, n, i) : n;
        const char *s = scalar(x, v, "listen.tls.protocols");
        char shown[80];
        if (!s) {
            bad = 1;
            continue;
        }
        size_t k = 0;
        while (known[k] && strcmp(s, known[k]))
            k++;
        if (known[k]) {
            want[k] = 1;
            continue;
        }
        size_t o = 0;
        while (old[o] && strcasecmp(s, old[o]))
            o++;
        if (old[o]) {
            report(x, v,
                   "protocol '%s' is not supported: it is insecure (pagid offers TLSv1.2 and "
                   "TLSv1.3)",
                   printable(v, shown, sizeof shown));
        } else if (n->type == YAML_SCALAR_NODE && strstr(s, "TLSv1.2") && strstr(s, "TLSv1.3")) {
            report(x, v,
                   "'listen.tls.protocols' is one string '%s': write a list, "
                   "protocols: [TLSv1.2, TLSv1.3]",
                   printable(v, shown, sizeof shown));
        } else {
            const char *near = config_suggest_among(s, strlen(s), known);
            report(x, v, "unknown protocol '%s' in 'listen.tls.protocols' (%s%s%s)",
                   printable(v, shown, sizeof shown),
                   near ? "did you mean '" : "expected TLSv1.2 or TLSv1.3", near ? near : "",
                   near ? "'?" : "");
        }
        bad = 1;
    }
    if (bad)
        return -1;
    t->protocols = strdup(want[0] && want[1] ? "TLSv1.2 TLSv1.3" : want[0] ? "TLSv1.2" : "TLSv1.3");
    t->protocols_pos = keep_pos(x, n);
    if (!t->protocols) {
        report(x, n, "out of memory");
        return -1;
    }
    return 0;
}

/* session_ticket_key: FILE or [FILE, ...]: the first encrypts, all decrypt. */
static int tls_ticket_keys_parse(load_ctx *x, const ynode *n, pagid_tls *t)
{
    size_t count = n->type == YAML_SEQUENCE_NODE ? n->len : 1;
    if (n->type == YAML_MAPPING_NODE) {
        report(x, n, "'listen.tls.session_ticket_key' must be a file or a list of files, not %s",
               kind_name(n));
        return -1;
    }
    if (count == 0) {
        report(x, n, "'listen.tls.session_ticket_key' is empty");
        return -1;
    }
    if (!(t->ticket_keys = calloc(count, sizeof *t->ticket_keys))) {
        report(x, n, "out of memory");
        return -1;
    }
    t->ticket_keys_pos = keep_pos(x, n);
    for (size_t i = 0; i < count; i++) {
        const ynode *v = n->type == YAML_SEQUENCE_NODE ? item_at(x, n, i) : n;
        char *f = tls_string(x, v, "listen.tls.session_ticket_key");
        if (!f)
            return -1;
        t->ticket_keys[t->n_ticket_keys++] = f;
    }
    return 0;
}

/*
 * The key exchange groups a listener may name, in OpenSSL's spelling (what
 * SSL_CTX_set1_groups_list takes and pagid -T shows), with the other names
 * operators know them by; all matched without regard to case. A fixed list
 * rather than whatever OpenSSL knows: pagid -t can then name a typo at its
 * line without building a context, and the binary curves RFC 8422
 * deprecated stay out. The finite-field groups are here for an operator who
 * must have them, not in the default: one ffdhe8192 key share costs the
 * server about 140 ms of CPU, X25519 one or two.
 */
static const struct tls_group {
    const char *name;
    const char *aliases[3];
} tls_groups[] = {
    {"X25519", {NULL}},
    {"prime256v1", {"P-256", "secp256r1", NULL}},
    {"secp384r1", {"P-384", NULL}},
    {"secp521r1", {"P-521", NULL}},
    {"X448", {NULL}},
    {"ffdhe2048", {NULL}},
    {"ffdhe3072", {NULL}},
    {"ffdhe4096", {NULL}},
    {"ffdhe6144", {NULL}},
    {"ffdhe8192", {NULL}},
};
#define N_TLS_GROUPS (sizeof tls_groups / sizeof tls_groups[0])

/* The index in tls_groups of name (any of its spellings), or -1. */
static int tls_group_find(const char *name)
{
    for (size_t i = 0; i < N_TLS_GROUPS; i++) {
        if (!strcasecmp(name, tls_groups[i].name))
            return (int)i;
        for (size_t a = 0; tls_groups[i].aliases[a]; a++)
            if (!strcasecmp(name, tls_groups[i].aliases[a]))
                return (int)i;
    }
    return -1;
}

/* An unknown group: its name and every valid one. No "did you mean": the
 * names differ by digits that name other curves (sect571r1 is one letter
 * and two digits from secp521r1), and the list is short enough to read. */
static void tls_group_unknown(load_ctx *x, const ynode *v, const char *path)
{
    char valid[256] = "", shown[80];
    for (size_t i = 0; i < N_TLS_GROUPS; i++) {
        size_t len = strlen(valid);
        snprintf(valid + len, sizeof valid - len, "%s%s", i ? ", " : "", tls_groups[i].name);
    }
    report(x, v, "unknown TLS group '%s' in '%s' (valid: %s)", printable(v, shown, sizeof shown),
           path, valid);
}

int config_tls_groups_parse(load_ctx *x, const ynode *n, const char *path, char **out,
                            pagid_pos *pos)
{
    char shown[80];
    if (n->type == YAML_MAPPING_NODE) {
        report(x, n, "'%s' must be a list of key exchange groups (e.g. [X25519, P-256]), not %s",
               path, kind_name(n));
        return -1;
    }
    size_t count = n->type == YAML_SEQUENCE_NODE ? n->len : is_null(n) ? 0 : 1;
    if (count == 0) {
        report(x, n, "'%s' is empty: name at least one group (the default is X25519, P-256, P-384)",
               path);
        return -1;
    }
    /* Each group once: OpenSSL refuses a list that names one twice. */
    int seen[N_TLS_GROUPS] = {0}, bad = 0;
    size_t len = 0;
    int order[N_TLS_GROUPS];
    size_t n_order = 0;
    for (size_t i = 0; i < count; i++) {
        const ynode *v = n->type == YAML_SEQUENCE_NODE ? item_at(x, n, i) : n;
        const char *s = scalar(x, v, path);
        if (!s) {
            bad = 1;
            continue;
        }
        int g = tls_group_find(s);
        if (g < 0 && n->type == YAML_SCALAR_NODE && strpbrk(s, ":, ")) {
            /* nginx's ssl_ecdh_curve X25519:prime256v1 */
            report(x, v, "'%s' is one string '%s': write a list, groups: [X25519, P-256]", path,
                   printable(v, shown, sizeof shown));
            bad = 1;
        } else if (g < 0) {
            tls_group_unknown(x, v, path);
            bad = 1;
        } else if (seen[g]) {
            int alias = strcasecmp(s, tls_groups[g].name) != 0;
            report(x, v, "TLS group '%s' is named twice in '%s'%s%s%s",
                   printable(v, shown, sizeof shown), path, alias ? " (another name for " : "",
                   alias ? tls_groups[g].name : "", alias ? ")" : "");
            bad = 1;
        } else {
            seen[g] = 1;
            order[n_order++] = g;
            len += strlen(tls_groups[g].name) + 1;
        }
    }
    if (bad)
        return -1;
    char *list = malloc(len);
    if (!list) {
        report(x, n, "out of memory");
        return -1;
    }
    list[0] = '\0';
    for (size_t i = 0; i < n_order; i++) {
        if (i)
            strcat(list, ":");
        strcat(list, tls_groups[order[i]].name);
    }
    free(*out);
    *out = list;
    *pos = keep_pos(x, n);
    return 0;
}

void set_tls_groups(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    config_tls_groups_parse(x, n, path, &x->c->tls_groups, &x->c->tls_groups_pos);
}

/* ciphers / ciphersuites: an OpenSSL list, judged by OpenSSL when the
 * context is built (start, reload, pagid -t). */
static int tls_list_string(load_ctx *x, const ynode *n, const char *path, char **out,
                           pagid_pos *pos)
{
    if (!(*out = tls_string(x, n, path)))
        return -1;
    *pos = keep_pos(x, n);
    return 0;
}

int config_tls_parse(load_ctx *x, const ynode *n, pagid_tls **out)
{
    static const char *const names[] = {
        "cert",         "key",         "certificates",    "protocols",          "ciphers",
        "ciphersuites", "client_auth", "session_tickets", "session_ticket_key", "ocsp",
        "groups",       NULL};
    enum {
        K_CERT,
        K_KEY,
        K_CERTS,
        K_PROTOCOLS,
        K_CIPHERS,
        K_SUITES,
        K_CLIENT_AUTH,
        K_TICKETS,
        K_TICKET_KEY,
        K_OCSP,
        K_GROUPS,
        K_COUNT
    };
    const ynode *keys[K_COUNT] = {NULL}, *vals[K_COUNT] = {NULL};
    *out = NULL;
    /* After a bad key, the known ones are still parsed: one run reports
     * every problem of the mapping. */
    int rc = tls_keys(x, n, "listen.tls", names, keys, vals);
    if (rc == -2)
        return -1;
    int bad = rc < 0;
    if (!vals[K_CERT] && !vals[K_KEY] && !vals[K_CERTS]) {
        if (!bad) /* else the typo'd key said it (e.g. 'crt') */
            report(x, n,
                   "'listen.tls' needs both 'cert' and 'key' (PEM files), or 'certificates'");
        bad = 1;
    }
    pagid_tls *t = config_tls_new();
    if (!t) {
        report(x, n, "out of memory");
        return -1;
    }
    t->pos = keep_pos(x, n);
    /* The default certificate first: cert/key, else the first of certificates. */
    if ((vals[K_CERT] || vals[K_KEY]) &&
        tls_pair_add(x, n, vals[K_CERT], vals[K_KEY], vals[K_OCSP], "listen.tls", t) < 0)
        bad = 1;
    if (vals[K_OCSP] && !vals[K_CERT] && !vals[K_KEY]) {
        report(x, keys[K_OCSP], "'ocsp' belongs with 'cert' and 'key' (each entry of "
                                "'certificates' takes its own)");
        bad = 1;
    }
    if (vals[K_CERTS] && tls_certificates_parse(x, vals[K_CERTS], t) < 0)
        bad = 1;
    if (vals[K_PROTOCOLS] && tls_protocols_parse(x, vals[K_PROTOCOLS], t) < 0)
        bad = 1;
    if (vals[K_CIPHERS] &&
        tls_list_string(x, vals[K_CIPHERS], "listen.tls.ciphers", &t->ciphers, &t->ciphers_pos) < 0)
        bad = 1;
    if (vals[K_SUITES] && tls_list_string(x, vals[K_SUITES], "listen.tls.ciphersuites",
                                          &t->ciphersuites, &t->ciphersuites_pos) < 0)
        bad = 1;
    if (vals[K_GROUPS] && config_tls_groups_parse(x, vals[K_GROUPS], "listen.tls.groups",
                                                  &t->groups, &t->groups_pos) < 0)
        bad = 1;
    if (vals[K_CLIENT_AUTH] && tls_client_auth_parse(x, vals[K_CLIENT_AUTH], t) < 0)
        bad = 1;
    if (vals[K_TICKETS] &&
        parse_bool(x, vals[K_TICKETS], "listen.tls.session_tickets", &t->session_tickets) < 0)
        bad = 1;
    if (vals[K_TICKET_KEY]) {
        if (tls_ticket_keys_parse(x, vals[K_TICKET_KEY], t) < 0)
            bad = 1;
        else if (!t->session_tickets) {
            report(x, keys[K_TICKET_KEY],
                   "'listen.tls.session_ticket_key' given with session_tickets: false");
            bad = 1;
        }
    }
    if (bad) {
        config_tls_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

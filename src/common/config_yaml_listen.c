/*
 * config_yaml_listen.c - the YAML loader's `listen` key: an address, a
 * mapping {address, mode, owner, group}, or a list of either. Users and
 * groups are resolved here, so `pagid -t` reports an unknown one with its
 * FILE:LINE:COLUMN instead of the master failing at bind time.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_suggest.h"
#include "config_yaml_int.h"

/* "0660", "660", "0o660" -> 0660; 0 or -1. Always octal, as chmod(1) and
 * systemd's SocketMode= read it: YAML 1.1 and 1.2 disagree on what a bare
 * 0660 means, so the text decides. No setuid/sticky bits on a socket. */
static int parse_mode(const char *s, unsigned *out)
{
    if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
        s += 2;
    size_t n = strspn(s, "01234567");
    if (n == 0 || s[n] || n > 4)
        return -1;
    unsigned long v = strtoul(s, NULL, 8);
    if (v > 0777)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* A whole decimal number that fits an id (uid_t and gid_t are 32-bit). */
static int numeric_id(const char *s, unsigned long *out)
{
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 10)
        return 0;
    errno = 0;
    unsigned long v = strtoul(s, NULL, 10);
    if (errno || v >= 0xffffffffUL) /* (uid_t)-1 means "unchanged" to chown */
        return 0;
    *out = v;
    return 1;
}

/* A name (resolved with getpwnam_r/getgrnam_r) or a numeric id; 0 or -1 after reporting. */
static int resolve_id(load_ctx *x, const ynode *n, const char *path, int is_group,
                      unsigned long *out)
{
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return -1;
    if (numeric_id(s, out))
        return 0;
    long sz = sysconf(is_group ? _SC_GETGR_R_SIZE_MAX : _SC_GETPW_R_SIZE_MAX);
    size_t len = sz > 0 ? (size_t)sz : 16384;
    for (;;) {
        char *mem = malloc(len);
        if (!mem) {
            report(x, n, "out of memory");
            return -1;
        }
        int rc;
        int found = 0;
        if (is_group) {
            struct group gr, *res = NULL;
            rc = getgrnam_r(s, &gr, mem, len, &res);
            if (rc == 0 && res) {
                *out = (unsigned long)gr.gr_gid;
                found = 1;
            }
        } else {
            struct passwd pw, *res = NULL;
            rc = getpwnam_r(s, &pw, mem, len, &res);
            if (rc == 0 && res) {
                *out = (unsigned long)pw.pw_uid;
                found = 1;
            }
        }
        free(mem);
        if (rc == ERANGE && len < (1u << 20)) {
            len *= 2; /* a group with many members */
            continue;
        }
        if (found)
            return 0;
        /* "Not found" comes back as 0, ENOENT, ESRCH, EBADF or EPERM, depending on NSS. */
        if (rc == 0 || rc == ENOENT || rc == ESRCH || rc == EBADF || rc == EPERM)
            report(x, n, "unknown %s '%s' for '%s'", is_group ? "group" : "user",
                   printable(n, shown, sizeof shown), path);
        else
            report(x, n, "cannot look up %s '%s' for '%s': %s", is_group ? "group" : "user",
                   printable(n, shown, sizeof shown), path, strerror(rc));
        return -1;
    }
}

/* `http2`: true/false (TLS: ALPN h2, on by default), or prior-knowledge
 * (cleartext: h2c when the client starts with the HTTP/2 preface). */
static int parse_http2(load_ctx *x, const ynode *n, int tls, int *out)
{
    char shown[80];
    const char *s = scalar(x, n, "listen.http2");
    if (!s)
        return -1;
    if (strcmp(s, "prior-knowledge") == 0) {
        if (tls) {
            report(x, n, "'listen.http2: prior-knowledge' is for cleartext listeners; a TLS "
                         "listener offers h2 by ALPN (http2: true, the default)");
            return -1;
        }
        *out = PAGID_H2_PRIOR_KNOWLEDGE;
        return 0;
    }
    static const char *const yes[] = {"true", "yes", "on", NULL};
    static const char *const no[] = {"false", "no", "off", NULL};
    int b = -1;
    for (size_t i = 0; yes[i]; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            b = 1;
        else if (strcasecmp(s, no[i]) == 0)
            b = 0;
    }
    if (b < 0) {
        report(x, n, "'listen.http2' must be true, false or prior-knowledge, not '%s'",
               printable(n, shown, sizeof shown));
        return -1;
    }
    if (b && !tls) {
        report(x, n, "'listen.http2: true' needs TLS (ALPN h2); on a cleartext listener write "
                     "'http2: prior-knowledge' for h2c");
        return -1;
    }
    *out = b ? PAGID_H2_ON : PAGID_H2_OFF;
    return 0;
}

/* The mapping form: {address: ADDR [, mode: 0660] [, owner: USER] [, group: GROUP]
 * [, tls: {...}] [, http2: BOOL|prior-knowledge]}. */
static void add_listen_mapping(load_ctx *x, const ynode *n)
{
    static const char *const names[] = {"address", "mode", "owner", "group", "tls", "http2", NULL};
    const ynode *keys[6] = {NULL}, *vals[6] = {NULL};
    char shown[80], sub[32];
    int bad = 0;
    for (size_t p = 0; p < n->len; p++) {
        const ynode *key = key_at(x, n, p), *val = value_at(x, n, p);
        const char *name = scalar(x, key, "listen key");
        if (!name) {
            bad = 1;
            continue;
        }
        size_t i = 0;
        while (i < 6 && strcmp(name, names[i]))
            i++;
        if (i == 6) {
            const char *near = config_suggest_among(name, strlen(name), names);
            if (near)
                report(x, key, "unknown key '%s' in a 'listen' entry (did you mean '%s'?)",
                       printable(key, shown, sizeof shown), near);
            else
                report(x, key,
                       "unknown key '%s' in a 'listen' entry (expected address, mode, owner, "
                       "group, tls or http2)",
                       printable(key, shown, sizeof shown));
            bad = 1;
        } else if (keys[i]) {
            report(x, key, "duplicate key '%s' in a 'listen' entry", names[i]);
            bad = 1;
        } else {
            keys[i] = key;
            vals[i] = val;
        }
    }
    if (!vals[0]) {
        if (!bad)
            report(x, n, "a 'listen' entry needs an address");
        return;
    }
    const char *addr = scalar(x, vals[0], "listen.address");
    if (!addr)
        return;
    pagid_listen l;
    const char *msg;
    if (config_parse_listen(addr, &l, &msg) < 0) {
        report(x, vals[0], "invalid listen address '%s': %s",
               printable(vals[0], shown, sizeof shown), msg);
        return;
    }
    int is_unix = l.kind == LISTEN_UNIX;
    config_listen_free(&l);

    unsigned mode = 0;
    unsigned long uid = 0, gid = 0;
    for (size_t i = 1; i < 4; i++) {
        if (!keys[i])
            continue;
        snprintf(sub, sizeof sub, "listen.%s", names[i]);
        if (!is_unix) {
            /* A TCP socket has no file to carry permissions. */
            report(x, keys[i], "'%s' applies to unix socket addresses only", sub);
            bad = 1;
            continue;
        }
        if (i == 1) {
            const char *s = scalar(x, vals[i], sub);
            if (!s) {
                bad = 1;
            } else if (parse_mode(s, &mode) < 0) {
                report(x, vals[i],
                       "invalid mode '%s' for '%s' (expected octal permissions such as 0660, "
                       "at most 0777)",
                       printable(vals[i], shown, sizeof shown), sub);
                bad = 1;
            }
        } else if (resolve_id(x, vals[i], sub, i == 3, i == 2 ? &uid : &gid) < 0) {
            bad = 1;
        }
    }
    pagid_tls *tls = NULL;
    if (vals[4] && config_tls_parse(x, vals[4], &tls) < 0)
        bad = 1;
    int http2 = PAGID_H2_DEFAULT;
    if (vals[5] && parse_http2(x, vals[5], vals[4] != NULL, &http2) < 0)
        bad = 1;
    if (bad) {
        config_tls_free(tls);
        return;
    }
    if (config_add_listen(x->c, addr, &msg) < 0) {
        report(x, vals[0], "invalid listen address '%s': %s",
               printable(vals[0], shown, sizeof shown), msg);
        config_tls_free(tls);
        return;
    }
    pagid_listen *added = &x->c->listens[x->c->n_listens - 1];
    added->pos = keep_pos(x, vals[0]);
    added->has_mode = keys[1] != NULL;
    added->mode = mode;
    added->has_uid = keys[2] != NULL;
    added->uid = (uid_t)uid;
    added->has_gid = keys[3] != NULL;
    added->gid = (gid_t)gid;
    added->tls = tls;
    added->http2 = http2;
}

static void add_listen(load_ctx *x, const ynode *n, const char *path)
{
    if (n->type == YAML_MAPPING_NODE) {
        add_listen_mapping(x, n);
        return;
    }
    const char *s = scalar(x, n, path);
    const char *msg;
    char shown[80];
    if (s && config_add_listen(x->c, s, &msg) < 0)
        report(x, n, "invalid listen address '%s': %s", printable(n, shown, sizeof shown), msg);
    else if (s)
        x->c->listens[x->c->n_listens - 1].pos = keep_pos(x, n);
}

void set_listen(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    /* The config's list replaces whatever was there, as -l replaces the
     * file's; the `listen` of included files append to it, in order. */
    if (!x->st->listen_set) {
        config_clear_listens(x->c);
        x->st->listen_set = 1;
    }
    if (n->type == YAML_SCALAR_NODE || n->type == YAML_MAPPING_NODE) {
        add_listen(x, n, path);
        return;
    }
    if (n->type != YAML_SEQUENCE_NODE) {
        report(x, n, "'%s' must be an address or a list of addresses, not %s", path, kind_name(n));
        return;
    }
    if (n->len == 0) {
        report(x, n, "'%s' is an empty list", path);
        return;
    }
    for (size_t i = 0; i < n->len; i++)
        add_listen(x, item_at(x, n, i), path);
}

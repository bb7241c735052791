/*
 * privileges.c - who the workers run as, and the switch to it. The master
 * starts as root to bind and keeps root (a reload may bind again); workers
 * run application code, so they never keep root unless `user: root` asks
 * for it: with no `user` they fall back to `nobody` (nginx's rule).
 */
#include "privileges.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* getpwnam_r / getgrnam_r / getgrgid_r want a buffer; a group with many
 * members may need more than sysconf says. */
#define LOOKUP_BUF_MAX (1u << 20)

/* Look a user up by name: 1 found, 0 not found, -1 error (errno-style code in *rc). */
static int find_user(const char *name, uid_t *uid, gid_t *gid, int *rc)
{
    long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t len = sz > 0 ? (size_t)sz : 16384;
    for (;;) {
        char *mem = malloc(len);
        if (!mem) {
            *rc = ENOMEM;
            return -1;
        }
        struct passwd pw, *res = NULL;
        *rc = getpwnam_r(name, &pw, mem, len, &res);
        if (*rc == 0 && res) {
            *uid = pw.pw_uid;
            *gid = pw.pw_gid;
        }
        free(mem);
        if (*rc == ERANGE && len < LOOKUP_BUF_MAX) {
            len *= 2;
            continue;
        }
        if (*rc == 0 && res)
            return 1;
        /* "Not found" comes back as 0, ENOENT, ESRCH, EBADF or EPERM, depending on NSS. */
        return *rc == 0 || *rc == ENOENT || *rc == ESRCH || *rc == EBADF || *rc == EPERM ? 0 : -1;
    }
}

/* A group by name (name != NULL) or by gid; its name into out. Same results as find_user. */
static int find_group(const char *name, gid_t *gid, char *out, size_t outlen, int *rc)
{
    long sz = sysconf(_SC_GETGR_R_SIZE_MAX);
    size_t len = sz > 0 ? (size_t)sz : 16384;
    for (;;) {
        char *mem = malloc(len);
        if (!mem) {
            *rc = ENOMEM;
            return -1;
        }
        struct group gr, *res = NULL;
        *rc = name ? getgrnam_r(name, &gr, mem, len, &res) : getgrgid_r(*gid, &gr, mem, len, &res);
        if (*rc == 0 && res) {
            *gid = gr.gr_gid;
            snprintf(out, outlen, "%s", gr.gr_name);
        }
        free(mem);
        if (*rc == ERANGE && len < LOOKUP_BUF_MAX) {
            len *= 2;
            continue;
        }
        if (*rc == 0 && res)
            return 1;
        return *rc == 0 || *rc == ENOENT || *rc == ESRCH || *rc == EBADF || *rc == EPERM ? 0 : -1;
    }
}

int priv_resolve(const pagid_config *c, uid_t euid, priv_identity *out, priv_problem *problem,
                 char *err, size_t errlen)
{
    const char *user = c->user && *c->user ? c->user : NULL;
    const char *group = c->group && *c->group ? c->group : NULL;
    memset(out, 0, sizeof *out);
    *problem = PRIV_OK;
    int rc = 0;
    if (!user && euid != 0)
        return 0; /* not root and nothing asked: the workers run as we do */

    const char *who = user ? user : PRIV_FALLBACK_USER;
    int found = find_user(who, &out->uid, &out->gid, &rc);
    if (found <= 0) {
        if (!user)
            snprintf(err, errlen,
                     "no 'user' is set and user '%s' does not exist: set 'user' to the account "
                     "the workers should run as ('user: root' keeps root)",
                     PRIV_FALLBACK_USER);
        else if (found == 0)
            snprintf(err, errlen, "unknown user '%s'", user);
        else
            snprintf(err, errlen, "cannot look up user '%s': %s", user, strerror(rc));
        *problem = user ? PRIV_BAD_USER : PRIV_NO_FALLBACK;
        return -1;
    }
    snprintf(out->user, sizeof out->user, "%s", who);
    if (group) {
        found = find_group(group, &out->gid, out->group, sizeof out->group, &rc);
        if (found <= 0) {
            if (found == 0)
                snprintf(err, errlen, "unknown group '%s'", group);
            else
                snprintf(err, errlen, "cannot look up group '%s': %s", group, strerror(rc));
            *problem = PRIV_BAD_GROUP;
            return -1;
        }
    } else if (find_group(NULL, &out->gid, out->group, sizeof out->group, &rc) <= 0) {
        /* A primary group without a name is still a group. */
        snprintf(out->group, sizeof out->group, "%lu", (unsigned long)out->gid);
    }

    if (euid != 0) {
        out->ignored = 1;
        return 0; /* nothing to switch from: the workers run as we do */
    }
    out->fallback = user == NULL;
    out->keeps_root = out->uid == 0;
    /* Root that stays root with its own group has nothing to change. */
    out->change = !(out->uid == 0 && !group);
    return 0;
}

void priv_describe(const priv_identity *id, char *out, size_t outlen, int *is_warning)
{
    *is_warning = 0;
    out[0] = '\0';
    if (id->fallback)
        snprintf(out, outlen,
                 "no 'user' is set: workers run as %s:%s (set 'user' to choose the account, "
                 "'user: root' to keep root)",
                 id->user, id->group);
    else if (id->keeps_root) {
        *is_warning = 1;
        snprintf(out, outlen,
                 "workers run as root ('user: %s'): the application has every privilege of the "
                 "master",
                 id->user);
    } else if (id->ignored) {
        *is_warning = 1;
        snprintf(out, outlen, "'user' ignored: pagid does not run as root, workers run as it does");
    }
}

int priv_drop(const priv_identity *id)
{
    if (!id->change)
        return 0;
    /* Group first: after setuid() it could no longer be changed. */
    if (setgid(id->gid) < 0 || initgroups(id->user, id->gid) < 0 || setuid(id->uid) < 0) {
        log_error("cannot drop privileges to %s:%s: %s", id->user, id->group, strerror(errno));
        return -1;
    }
    /* Make sure there is no way back, whatever the platform's setuid does. */
    if (id->uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        log_error("dropping privileges to %s did not stick", id->user);
        return -1;
    }
    return 0;
}

int priv_drop_for(const pagid_config *c)
{
    priv_identity id;
    priv_problem problem;
    char err[256];
    if (priv_resolve(c, geteuid(), &id, &problem, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    return priv_drop(&id);
}

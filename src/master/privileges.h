/*
 * privileges.h - who the workers run as: the configured user and group,
 * `nobody` when the master runs as root and none is configured, root only
 * when `user: root` says so; and the switch each worker makes after fork.
 */
#ifndef PAGID_PRIVILEGES_H
#define PAGID_PRIVILEGES_H

#include <stddef.h>
#include <sys/types.h>

#include "common/config.h"

/** The account workers fall back to when the master runs as root and no
 * `user` is configured. */
#define PRIV_FALLBACK_USER "nobody"

/** What priv_resolve found wrong. */
typedef enum priv_problem {
    PRIV_OK,
    PRIV_BAD_USER,    /* the configured user does not exist (or cannot be looked up) */
    PRIV_BAD_GROUP,   /* the configured group does not exist */
    PRIV_NO_FALLBACK, /* root, no user, and PRIV_FALLBACK_USER does not exist */
} priv_problem;

/** The identity of a configuration's workers. */
typedef struct priv_identity {
    int change;     /* the workers switch to uid/gid (the master runs as root) */
    int fallback;   /* no `user` configured: PRIV_FALLBACK_USER */
    int keeps_root; /* the workers keep uid 0 (`user: root`, explicitly) */
    int ignored;    /* `user` is configured but the master is not root: no switch */
    uid_t uid;
    gid_t gid;
    char user[64]; /* names, for messages and initgroups */
    char group[64];
} priv_identity;

/**
 * Decide who the workers of c run as when the master's effective uid is
 * euid (a parameter so that tests can ask what root would do). The
 * configured user and group must exist whoever runs pagid (a typo is an
 * error before it is a surprise). 0, or -1 with *problem set and err
 * holding a message ("unknown user 'x'").
 */
int priv_resolve(const pagid_config *c, uid_t euid, priv_identity *out, priv_problem *problem,
                 char *err, size_t errlen);

/**
 * One line saying who the workers run as, when it deserves saying: the
 * fallback ("workers run as nobody:nogroup ..."), root kept on purpose, or a
 * user that is ignored because pagid is not root. Empty otherwise.
 * *is_warning tells a warning from an information.
 */
void priv_describe(const priv_identity *id, char *out, size_t outlen, int *is_warning);

/**
 * Become id (setgid, initgroups or setgroups, setuid) when id->change; a
 * no-op otherwise. Called in each worker right after fork, and by the
 * single process (--workers 0) after binding. 0, or -1 after logging why.
 */
int priv_drop(const priv_identity *id);

/** priv_resolve for this process, then priv_drop; 0 or -1 after logging. */
int priv_drop_for(const pagid_config *c);

#endif

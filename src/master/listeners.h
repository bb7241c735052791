/*
 * listeners.h - the listening sockets: bound once by the master (or by the
 * single process with --workers 0) and inherited by every worker.
 */
#ifndef PAGID_LISTENERS_H
#define PAGID_LISTENERS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/config.h"
#include "worker/worker.h"

/** TCP listen backlog; the kernel clamps it to net.core.somaxconn. */
#define LISTEN_BACKLOG 4096

/**
 * Every socket the configuration asks for. items[i].conf borrows
 * cfg->listens[i], so the set must not outlive the config it was opened
 * from. For a unix socket, the device and inode recorded at bind time let
 * the owner unlink its own socket file and never a newer one that another
 * process created at the same path.
 */
typedef struct listener_set {
    worker_listener *items; /* handed to worker_run as is */
    size_t n;
    dev_t *unix_dev; /* per item; 0 when not a unix socket we created */
    ino_t *unix_ino;
    unsigned char *keep_file; /* per item: systemd's socket, whose file is never unlinked */
} listener_set;

/** A listening socket this process was handed: by the old master of a
 * binary upgrade (PAGID_INHERITED_FDS) or by systemd (LISTEN_FDS). */
typedef struct inherited_fd {
    int fd;      /* -1 once taken by a listener_set */
    char *name;  /* the listen spec it served, a systemd FileDescriptorName, or NULL */
    int systemd; /* systemd's (passed by it, or on from it by an upgrading master):
                    a unix socket's file belongs to systemd and is never unlinked */
} inherited_fd;

typedef struct inherited_set {
    inherited_fd *items;
    size_t n;
    const char *origin; /* "inherited" or "systemd", for messages */
} inherited_set;

/** The environment variable an upgrading master hands its sockets over in. */
#define LISTENERS_ENV "PAGID_INHERITED_FDS"
/** ...and the one with the addresses of the sockets systemd passed
 * ("SPEC;SPEC", escaped the same way): the new master serves them when no
 * listener is configured, and never unlinks their files. */
#define LISTENERS_ACTIVATED_ENV "PAGID_ACTIVATED_LISTENS"

/**
 * Bind and listen on every cfg->listens[]. Sockets are non-blocking and
 * close-on-exec. On failure nothing stays open, and err holds a line such
 * as "cannot listen on 127.0.0.1:8080: Address already in use"; returns
 * 0 or -1.
 */
int listeners_open(const pagid_config *cfg, listener_set *ls, char *err, size_t errlen);

struct addrinfo;
/**
 * The addresses a TCP entry binds (no host: 0.0.0.0), as listeners_open
 * resolves them and as pagid -t checks them: getaddrinfo's result (0, *res
 * to be freed with freeaddrinfo) or its error code (EAI_SYSTEM: see errno).
 */
int listeners_resolve(const pagid_listen *l, struct addrinfo **res);

/**
 * Refuse listen entries (status.listen among them) that would share a
 * socket address once resolved: one address twice (localhost:P beside
 * 127.0.0.1:P), a wildcard and an address under it (0.0.0.0:P beside
 * 127.0.0.1:P, [::]:P beside [::1]:P; IPv6 sockets are v6-only, so [::]:P
 * and 127.0.0.1:P do not overlap), one unix socket file twice. Each is
 * printed to err at the later entry's FILE:LINE:COLUMN, naming the
 * earlier one; returns how many. Entries that do not resolve are left to
 * listeners_open and pagid -t.
 */
int listeners_check_overlap(const pagid_config *c, FILE *err);

/**
 * listeners_open, but an address that one of the live sets reuse[] already
 * listens on gets a duplicate of that socket (same kernel socket, same
 * accept queue: a reload refuses nobody), and an address one of inh's
 * sockets is bound to (or whose name is the listen spec) takes that socket
 * (its slot becomes -1). Only what matches nothing is bound anew.
 */
int listeners_open_with(const pagid_config *cfg, listener_set *ls, const listener_set *const *reuse,
                        size_t n_reuse, inherited_set *inh, char *err, size_t errlen);

/**
 * "FD:SPEC;FD:SPEC..." for ls (';' and '%' in a spec are %-escaped), what
 * LISTENERS_ENV carries. Returns the length, or -1 when out is too small.
 */
int listeners_env_format(const listener_set *ls, char *out, size_t outlen);

/**
 * Parse a LISTENERS_ENV value into out (allocated; release with
 * inherited_set_free). Every fd must be a listening socket; 0, or -1 with
 * err set and nothing allocated.
 */
int listeners_env_parse(const char *value, inherited_set *out, char *err, size_t errlen);

/**
 * The sockets of systemd socket activation (LISTEN_FDS, LISTEN_FDNAMES;
 * the variables are unset). Made close-on-exec. Returns how many (0 when
 * not socket-activated), or -1.
 */
int listeners_from_systemd(inherited_set *out);

/**
 * The listen spec of each socket of inh ("127.0.0.1:8080", "[::]:80",
 * "unix:/run/p.sock"), for serving exactly what systemd passed when no
 * listener is configured. Sockets no spec can name are left out with a
 * warning. *out is allocated (free each string and the array); 0 or -1.
 */
int listeners_inherited_specs(const inherited_set *inh, char ***out, size_t *n);

/** specs joined with ';' (escaped like LISTENERS_ENV); the length, or -1 if out is too small. */
int listeners_specs_format(char *const *specs, size_t n, char *out, size_t outlen);
/** The reverse: *out allocated as for listeners_inherited_specs; 0 or -1. */
int listeners_specs_parse(const char *value, char ***out, size_t *n);

/** Close every socket of inh nobody took (logging each), and free it. */
void inherited_set_free(inherited_set *inh, int warn_unused);

/** Does ls hold a unix socket of this device and inode? */
int listeners_has_unix(const listener_set *ls, dev_t dev, ino_t ino);

/**
 * Close this process's copies of the sockets (the kernel socket lives on
 * while a worker still holds it). Idempotent: a closed slot has fd -1.
 */
void listeners_close(listener_set *ls);

/**
 * Close, unlink the unix socket files this process created (only if they
 * are still the same inode), and free the set. Only the process that opened
 * the set calls this, on its way out.
 */
void listeners_destroy(listener_set *ls);

#endif

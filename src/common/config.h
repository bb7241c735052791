/*
 * config.h - pagid's typed configuration model.
 *
 * A pagid_config is built once (defaults, then the YAML file, then the
 * command-line overrides) and never mutated afterwards; a reload builds a
 * new one beside the live one. All strings are owned by the config.
 */
#ifndef PAGID_CONFIG_H
#define PAGID_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef enum listen_kind { LISTEN_TCP, LISTEN_UNIX } listen_kind;

/* Where a value was written (1-based); line 0 when it did not come from a
 * file (a default, the command line). Kept so that checks made after
 * loading (pagid -t's look at the system) can still point at the line, in
 * the main file or an included one. file is owned by the config
 * (pagid_config.pos_files); NULL means the main file. */
typedef struct pagid_pos {
    unsigned line, col;
    const char *file;
} pagid_pos;

/* One certificate and its private key (PEM files; the chain follows the
 * leaf in cert). Read by the master, as root, when the listeners open. */
typedef struct pagid_tls_cert {
    char *cert, *key;
    char *ocsp;         /* a DER OCSP response to staple, or NULL */
    pagid_pos pos;      /* the entry's cert value in the file */
    pagid_pos key_pos;  /* its key value: where key problems are reported */
    pagid_pos ocsp_pos; /* its ocsp value */
} pagid_tls_cert;

typedef enum tls_client_auth {
    TLS_CLIENT_NONE,
    TLS_CLIENT_OPTIONAL,
    TLS_CLIENT_REQUIRE
} tls_client_auth;

/* A listener's `tls:` mapping. certs[0] is the default certificate; the
 * others are chosen by SNI. Strings NULL mean pagid's defaults. */
typedef struct pagid_tls {
    pagid_tls_cert *certs;
    size_t n_certs;
    char *protocols;    /* "TLSv1.2 TLSv1.3": the versions offered, or NULL */
    char *ciphers;      /* TLS 1.2 cipher list (OpenSSL syntax), or NULL */
    char *ciphersuites; /* TLS 1.3 suites, or NULL */
    char *groups;       /* key exchange groups, OpenSSL's names ':'-joined; NULL: tls.groups */
    tls_client_auth client_auth;
    char *client_ca;     /* CA file clients are verified against */
    char *client_crl;    /* CRLs (PEM) client certificates are checked against, or NULL */
    int verify_depth;    /* most intermediate CAs in a client's chain; -1: OpenSSL's default */
    int session_tickets; /* 1 (default) or 0 */
    char **ticket_keys;  /* session_ticket_key files, the first encrypts; NULL: generated */
    size_t n_ticket_keys;
    pagid_pos pos; /* the `tls` key of the listen entry */
    /* Where the values that files and OpenSSL judge later were written
     * (zero when not set): messages point at them. */
    pagid_pos protocols_pos, ciphers_pos, ciphersuites_pos, client_ca_pos, ticket_keys_pos;
    pagid_pos client_crl_pos, groups_pos;
} pagid_tls;

typedef struct pagid_listen {
    listen_kind kind;
    char *spec; /* as written: "127.0.0.1:8080", "[::1]:80", "unix:/run/p.sock" */
    char *host; /* TCP: numeric or name, without brackets; NULL = any */
    int port;   /* TCP port */
    char *path; /* UNIX: socket path */
    int status; /* the status.listen entry: serves only the metrics (config_finalize) */
    /* UNIX only, from the mapping form {address, mode, owner, group}. Flags,
     * so a zeroed entry means "unset": a fresh socket gets 0666 and the
     * master's user and group; an existing one (reload) keeps what it has. */
    int has_mode, has_uid, has_gid;
    unsigned mode; /* permission bits, at most 0777 */
    uid_t uid;
    gid_t gid;
    pagid_pos pos;  /* the address in the file */
    pagid_tls *tls; /* NULL: cleartext (owned) */
    int http2;      /* PAGID_H2_*: the listen entry's `http2` key */
} pagid_listen;

/* A listener's `http2:`. Unset means on for TLS (ALPN h2) and off for
 * cleartext; cleartext HTTP/2 is only h2c with prior knowledge. */
enum { PAGID_H2_DEFAULT = 0, PAGID_H2_OFF, PAGID_H2_ON, PAGID_H2_PRIOR_KNOWLEDGE };
/** Does the listener offer h2 by ALPN (TLS) or accept h2c prior knowledge (cleartext)? */
static inline int config_listen_h2(const pagid_listen *l)
{
    if (l->tls)
        return l->http2 != PAGID_H2_OFF;
    return l->http2 == PAGID_H2_PRIOR_KNOWLEDGE;
}

typedef enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG } log_level;

typedef struct pagid_limits {
    size_t max_connections;
    size_t max_request_line;
    size_t max_header_size;
    size_t max_header_count;
    size_t max_body_size;
    size_t max_ws_message_size;
    size_t max_receive_queue;      /* events queued for an app that does not receive */
    size_t max_receive_queue_size; /* bytes of WebSocket messages (inflated) queued for the app */
    /* HTTP/2: streams a client may open at once; the request body it may send
     * ahead of the app's receives, per stream and per connection (the bound on
     * a connection's body memory); client resets of open streams per second
     * before GOAWAY ENHANCE_YOUR_CALM (rapid reset); response bodies from
     * files one connection holds open (each an fd of the worker's). */
    size_t http2_max_streams;
    size_t http2_stream_window;
    size_t http2_connection_window;
    size_t http2_max_resets;
    size_t http2_max_open_files;
} pagid_limits;

/* Durations in seconds; 0 disables a timeout. Three stalls are told apart:
 * write (the socket takes no response bytes), http2_window (a client keeps
 * its HTTP/2 flow-control windows shut while streams hold bytes for it) and
 * ws_queue (an app leaves a full WebSocket receive queue untaken); the last
 * two default to write (CONFIG_TIMEOUT_UNSET until config_finalize). */
#define CONFIG_TIMEOUT_UNSET (-1.0)
typedef struct pagid_timeouts {
    /* request: without body bytes while the app waits for them (client_timeout);
     * response: from the request to the app's response start (504, x-response-timeout). */
    double header, idle, keepalive, request, response, write;
    double http2_window, ws_queue;
    double ws_idle, sse_idle, ws_close;
    double shutdown, heartbeat, lifespan_startup;
} pagid_timeouts;

/* Options of the mapping form {static: DIR, listing: BOOL, follow_symlinks: BOOL,
 * cache_entries: N, cache_bytes: SIZE, cache_valid: DURATION}; each worker's
 * static app keeps what paths resolved to (see apps/static_cache.c). */
typedef struct pagid_static_opts {
    int listing;
    int follow_symlinks;
    size_t cache_entries; /* files remembered per worker; 0 = no cache */
    size_t cache_bytes;   /* bytes of small files held in memory per worker */
    double cache_valid;   /* seconds a remembered lookup is trusted unchecked */
} pagid_static_opts;
#define CONFIG_STATIC_CACHE_ENTRIES 256
#define CONFIG_STATIC_CACHE_BYTES (8u << 20)
#define CONFIG_STATIC_CACHE_VALID 0.0 /* the loop iteration, then one stat a use */
/** The defaults of a static app's options. */
void config_static_opts_init(pagid_static_opts *o);

/* One entry of `mounts`: requests under path go to app (the top-level app serves "/"). */
typedef struct pagid_mount {
    char *path; /* decoded path prefix: starts with '/', no trailing '/', never "/" */
    char *app;  /* app spec */
    pagid_static_opts static_opts;
} pagid_mount;

typedef enum pubsub_backend_kind {
    PUBSUB_BACKEND_LOCAL = 0,
    PUBSUB_BACKEND_REDIS
} pubsub_backend_kind;

/* `pubsub:` (docs/pubsub.md): messages cross workers with no backend; a
 * backend carries them between pagid instances too. */
typedef struct pagid_pubsub {
    pubsub_backend_kind backend;
    char *url;     /* redis: checked by redis_url_parse at load; NULL when unset */
    char *prefix;  /* put before each channel name in the backend ("pagid:") */
    size_t buffer; /* bytes of publishes kept for the backend while it is down */
    /* the `pubsub` app: origins (normal form, origin.h) whose pages may use
     * it besides the request's own; "*" for any */
    char **allowed_origins;
    size_t n_allowed_origins;
    pagid_pos backend_pos, url_pos;
} pagid_pubsub;

/* One of `shared_dicts` (pagi_shared(3)): a dictionary every worker sees. */
typedef struct pagid_shared_dict {
    char *name;  /* [A-Za-z0-9_.-], 1..63 bytes, unique */
    size_t size; /* of the whole mapping */
    pagid_pos pos;
    /* The mapping: made by the master before it forks the generation's
     * workers (master/shdicts.c), or by -w 0's single process; borrowed
     * here, owned by whoever made it. NULL until then. */
    struct pagi_shared *dict;
} pagid_shared_dict;
/* `app: {psgi|perl: FILE, worker_pool: {...}}` or a top-level `worker_pool:`
 * (docs/psgi.md, "The worker pool"): pool processes per generation, forked
 * from the zygote, that run every PSGI app of the config, mounted ones too
 * (and the PAGI app's named handlers), off the workers' loops. */
typedef struct pagid_pool {
    int processes;   /* 0 = no pool */
    int queue_limit; /* requests waiting for a free process beyond `processes` */
    double timeout;  /* one request's or call's limit in a process; 0 = none */
    char *handlers;  /* perl apps: the handlers file (worker_pool extension), or NULL */
    int *fds;        /* set by the master per generation: a listening socket per
                        pool process (processes of them, owned by the
                        generation), inherited by its workers and processes */
    int set;         /* written in the config (processes 0: no pool); else a
                        PSGI app under a master gets the default pool */
} pagid_pool;

/** The default `processes`: two per online CPU (Starman's 5 on a 2-CPU box is
 * about the same), at least 2, at most CONFIG_POOL_MAX_PROCESSES. */
int config_pool_default_processes(void);
#define CONFIG_POOL_DEFAULT_QUEUE 64
#define CONFIG_POOL_DEFAULT_TIMEOUT 30.0
#define CONFIG_POOL_MAX_PROCESSES 256

typedef struct pagid_config {
    char *source;          /* file the config came from, or NULL */
    pagid_listen *listens; /* at least one after config_finalize */
    size_t n_listens;
    int workers;                  /* 0 = single process; CONFIG_WORKERS_AUTO = nproc */
    size_t max_requests;          /* a worker recycles itself after this many requests; 0 = never */
    int preload;                  /* apps loaded once, by a zygote: 1, 0, CONFIG_PRELOAD_AUTO */
    int debug;                    /* debug mode: app-interface misuse checked and logged */
    char *app;                    /* app spec: hello, echo, demo, static:DIR, /x.so */
    pagid_static_opts app_static; /* when app is static: (reset by config_set_app) */
    char *perl_lib;               /* app: {perl|psgi: FILE, lib: [...]}: ':'-joined dirs, or NULL */
    pagid_mount *mounts;          /* apps under path prefixes, in file order */
    size_t n_mounts, cap_mounts;
    struct strtab *mount_paths; /* the paths in mounts, for the duplicate check (owned) */
    pagid_limits limits;
    pagid_timeouts timeouts;
    size_t high_watermark, low_watermark;
    char *access_log_path, *access_log_format;
    char *error_log_path;
    log_level error_log_level;
    pagid_listen *status_listen; /* status.listen: the metrics listener; NULL = off */
    char *status_path;           /* status.path: where the metrics are served */
    pagid_pubsub pubsub;
    pagid_shared_dict *shared_dicts; /* `shared_dicts`, in file order */
    size_t n_shared_dicts;
    pagid_pool worker_pool; /* the pool of every PSGI app (and of a PAGI app's
                               handlers); processes 0 = none */
    /* tls.groups: the key exchange groups of a TLS listener without its own
     * (OpenSSL's names, ':'-joined); NULL: PAGID_TLS_DEFAULT_GROUPS. */
    char *tls_groups;
    pagid_pos tls_groups_pos;
    char *pid_file, *user, *group;
    /* Where these were set in the file, for messages about them. */
    pagid_pos pid_file_pos, user_pos, group_pos, error_log_pos, access_log_pos;
    /* The names the positions above point to (owned; one per file loaded). */
    char **pos_files;
    size_t n_pos_files;
} pagid_config;

#define CONFIG_WORKERS_AUTO (-1)
#define CONFIG_PRELOAD_AUTO (-1) /* on when an app is a Perl app */
#define CONFIG_DEFAULT_APP "demo"
#define CONFIG_DEFAULT_LISTEN "127.0.0.1:8080"
#define CONFIG_MAX_WORKERS 1024

/** Fill every field with its default (no listeners yet). */
void config_init_defaults(pagid_config *c);

/**
 * Load a YAML file over c. Each problem is printed to err as
 * "FILE:LINE:COLUMN: message" and counted; returns the number of errors
 * (0 = valid). c holds whatever was valid.
 */
int config_load_file(pagid_config *c, const char *path, FILE *err);

/** Same, from a string (name is used in messages); for tests. */
int config_load_string(pagid_config *c, const char *yaml, const char *name, FILE *err);

/**
 * Parse "HOST:PORT", "[V6]:PORT", ":PORT", "*:PORT", "PORT", "unix:/PATH";
 * 0 or -1 (msg set, a static string). On success out owns its strings:
 * release them with config_listen_free.
 */
int config_parse_listen(const char *spec, pagid_listen *out, const char **msg);
void config_listen_free(pagid_listen *l);
/** A zeroed tls mapping with the defaults (session tickets on); NULL when out of memory. */
pagid_tls *config_tls_new(void);
/** Add a certificate/key pair (copied); 0 or -1 (out of memory). */
int config_tls_add_cert(pagid_tls *t, const char *cert, const char *key, pagid_pos pos);
void config_tls_free(pagid_tls *t);
/** Do a and b name the same address (kind, host, port; or the same path)? */
int config_same_listen(const pagid_listen *a, const pagid_listen *b);
/**
 * Append one listener (a duplicate of an existing one is an error). -l
 * replaces the file's list by calling config_clear_listens first.
 */
int config_add_listen(pagid_config *c, const char *spec, const char **msg);
void config_clear_listens(pagid_config *c);
int config_set_app(pagid_config *c, const char *spec, const char **msg);
/**
 * Append a mount: path must start with '/', have no empty, "." or ".."
 * segment, no NUL, '?' or '#'; a trailing '/' is dropped; "/" itself and
 * duplicates are refused. The app spec is not checked here
 * (config_check_app). 0, or -1 with *msg (static string).
 */
int config_add_mount(pagid_config *c, const char *path, const char *app,
                     const pagid_static_opts *opts, const char **msg);
/**
 * Make room for `more` mounts beyond those in c (a list about to be added),
 * so a long list does not regrow the mounts and their path table as it is
 * added; 0, or -1 when out of memory.
 */
int config_reserve_mounts(pagid_config *c, size_t more);

/** "64k" "10m" "1g" "512" -> bytes; 0 or -1. */
int config_parse_size(const char *s, size_t *out);
/** "500ms" "30s" "5m" "1h" "0" -> seconds; 0 or -1. */
int config_parse_duration(const char *s, double *out);
/** "0".."CONFIG_MAX_WORKERS" or "auto" (CONFIG_WORKERS_AUTO); 0 or -1 (msg). */
int config_parse_workers(const char *s, int *out, const char **msg);

/** Is the app spec known (builtin name, existing .so, existing static dir)? 0 or -1 (msg). */
int config_check_app(const char *spec, char *msg, size_t msglen);
/**
 * A module spec is PATH.so or PATH.so:ARG (ARG goes to the module's create):
 * the length of PATH.so, or 0 when spec names no module.
 */
size_t config_module_path_len(const char *spec);
/**
 * Does spec name a Perl app the Perl host runs? CONFIG_PERL_PAGI for a PAGI
 * app file (FILE.pl), CONFIG_PERL_PSGI for a PSGI one (FILE.psgi, by its
 * extension; plackup takes any name), else 0.
 */
enum { CONFIG_PERL_PAGI = 1, CONFIG_PERL_PSGI = 2 };
int config_perl_app_kind(const char *spec);
/** Is the top-level app or a mounted one a PSGI app (then, under a master,
 * the worker pool serves them all)? */
int config_has_psgi_app(const pagid_config *c);
/**
 * PATH.so of a module spec, copied NUL-terminated into path: its length, 0
 * when spec names no module, -1 when it does not fit in size bytes.
 */
int config_module_path(const char *spec, char *path, size_t size);

/**
 * Does c preload its apps (a zygote per generation)? `preload` when set,
 * else yes when the top-level app or a mount is a Perl app (.pl, .psgi): its
 * compiled code is worth sharing. A .so module's code is shared through
 * the page cache anyway and a built-in's is pagid's: preloaded only when
 * `preload: true` says so.
 */
int config_preload_wanted(const pagid_config *c);

/**
 * Defaults that depend on other fields (listen when none, auto workers) and
 * rules across keys (`group` needs `user`); 0 or -1 after printing why.
 */
int config_finalize(pagid_config *c, FILE *err);
/** Does a log path mean standard error ("-", "stderr", "/dev/stderr")? */
int config_path_is_stderr(const char *path);
/** 1 when msg starts as config_report's lines do, with "FILE:LINE:COLUMN: "
 * (so nobody glues a "pagid: " before it). */
int config_msg_has_pos(const char *msg);

/**
 * Print one problem about a value of c: "FILE:LINE:COLUMN: message" when
 * pos points into c's file, else "pagid: message". A line and a newline.
 */
void config_report(const pagid_config *c, pagid_pos pos, FILE *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void config_free(pagid_config *c);

#endif

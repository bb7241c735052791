/*
 * config_yaml_int.h - what the parts of the YAML loader share: the state of
 * one load (the main file and its includes), the walk's per-file context,
 * the key table row, error reporting with FILE:LINE:COLUMN, and node
 * helpers. config_yaml_load.c reads files; config_yaml_doc.c parses one
 * into a document (ydoc.h: anchors, aliases and their bound); config_yaml.c walks
 * a document and sets plain values; config_yaml_app.c parses the app spec
 * forms and the mounts list; config_yaml_listen.c the listen list;
 * config_yaml_tls.c a listen entry's `tls:` mapping; config_yaml_pubsub.c
 * the `pubsub:` values beyond plain setters; config_yaml_include.c
 * `include:`.
 */
#ifndef PAGID_CONFIG_YAML_INT_H
#define PAGID_CONFIG_YAML_INT_H

#include <stdio.h>
#include <sys/types.h>
#include <yaml.h>

#include "buf.h"
#include "config.h"
#include "strtab.h"
#include "ydoc.h"

/* A config file is a few kilobytes; refuse to slurp something absurd. */
#define MAX_FILE_SIZE (16 * 1024 * 1024)
/* nginx-like conf.d layouts nest one or two levels; more is a mistake. */
#define MAX_INCLUDE_DEPTH 8
/* Nodes that aliases may add to the walk of one load (the main file and its
 * includes): far more than any real config repeats, far less than what a
 * "billion laughs" file of nested aliases would make the walk visit. */
#define MAX_ALIAS_NODES 1000000
/* Bounds what one stray glob (a whole directory tree) can make one load read. */
#define MAX_INCLUDED_FILES 1024

/* A place in one of the load's files: index into load_state.files, 1-based line and column. */
typedef struct src_pos {
    unsigned file;
    size_t line, col;
} src_pos;

/* A file of the load: the main one (index 0) or an included one. */
typedef struct load_file {
    char *name; /* as shown in messages; lives until the load ends */
    int has_id; /* dev/ino known (not for config_load_string's text) */
    dev_t dev;
    ino_t ino;
    int open;   /* being loaded now: on the chain of includes */
    int parent; /* the file that included it; -1 for the main file */
    src_pos included_at;
} load_file;

struct key_def;

/* A single-value key set so far in this load, and where (for "first set at"). */
typedef struct key_seen {
    const struct key_def *k;
    src_pos at;
} key_seen;

/* One config_load_*: shared by the main file and every file it includes,
 * so a key set twice across files and include cycles are seen. */
typedef struct load_state {
    pagid_config *c;
    FILE *err;
    int errors;
    load_file *files;
    size_t n_files;
    key_seen *seen;
    size_t n_seen;
    size_t alias_nodes;    /* nodes aliases added so far, bounded by MAX_ALIAS_NODES */
    strtab lib_seen;       /* `lib` directories added to perl_lib */
    strtab apps_ok;        /* app specs config_check_app accepted in this load */
    buf perl_lib;          /* their ':'-joined list, given to the config at the end */
    int listen_set;        /* a `listen` was met: later ones append */
    int has_high, has_low; /* flow_control watermarks, cross-checked at the end */
    pagid_pool pool;       /* the top-level app mapping's worker_pool, until set_app takes it */
    int pool_set;
    src_pos high_at, low_at;
} load_state;

/* The walk of one file's document. */
typedef struct load_ctx {
    pagid_config *c;
    FILE *err;
    load_state *st;
    const ydoc *doc;
    unsigned file;             /* index into st->files */
    unsigned depth;            /* include nesting: 0 for the main file */
    struct app_memo *app_memo; /* config_yaml_app.c's, for this document; NULL until used */
} load_ctx;

typedef void (*key_handler)(load_ctx *x, const struct key_def *k, const ynode *n, const char *path);

typedef struct key_def {
    const char *name;
    key_handler set;
    size_t off;                /* field in pagid_config */
    const struct key_def *sub; /* sections: their keys */
    size_t min, max;           /* sizes and counts */
} key_def;

/** app.worker_pool (config_yaml_pool.c) of an app of kind "perl" or "psgi"; 0 or -1. */
int parse_worker_pool(load_ctx *x, const ynode *n, const char *path, const char *kind,
                      pagid_pool *out);

/** Report a problem at a 1-based line and column of x's file; counts the error. */
void report_at(load_ctx *x, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define report(x, node, ...) report_at((x), (node)->line + 1, (node)->col + 1, __VA_ARGS__)

/** Where node n of x's file is. */
src_pos node_pos(const load_ctx *x, const ynode *n);
/* Room for pos_text: a file name of up to PATH_MAX bytes and two numbers. */
#define POS_TEXT_MAX (4096 + 48)
/** "FILE:LINE:COLUMN" of a place, for "first set at ..." in messages. */
const char *pos_text(const load_state *st, src_pos at, char *out, size_t outlen);

#define FIELD(x, k, type) ((type *)((char *)(x)->c + (k)->off))

/** Where n starts, for the config's *_pos fields (naming an included file). */
pagid_pos keep_pos(load_ctx *x, const ynode *n);
/** A short printable form of a node for messages. */
const char *printable(const ynode *n, char *out, size_t outlen);
/** The same for len bytes of s (control bytes become '?', long text ends in "..."). */
const char *printable_text(const char *s, size_t len, char *out, size_t outlen);
/** "a list", "a mapping", "a value". */
const char *kind_name(const ynode *n);
/** Item i of sequence n; key and value of pair i of mapping n. */
static inline const ynode *item_at(const load_ctx *x, const ynode *n, size_t i)
{
    return ydoc_item(x->doc, n, i);
}
static inline const ynode *key_at(const load_ctx *x, const ynode *n, size_t i)
{
    return ydoc_key(x->doc, n, i);
}
static inline const ynode *value_at(const load_ctx *x, const ynode *n, size_t i)
{
    return ydoc_value(x->doc, n, i);
}
/** An empty or ~/null plain scalar (libyaml does not resolve tags). */
static inline int is_null(const ynode *n)
{
    return (n->flags & YNODE_NULL) != 0;
}
/** The scalar's text, or NULL after reporting why it cannot be one. */
const char *scalar(load_ctx *x, const ynode *n, const char *path);

/** Walk a document's root mapping against the top-level keys (config_yaml.c). */
void walk_top(load_ctx *x, const ynode *root);

/* config_yaml_load.c: reading and parsing files. */
/**
 * Add a file to the load (the name is copied); its index, or -1 when out
 * of memory.
 */
int load_add_file(load_state *st, const char *name, int parent, src_pos included_at);
/** Report the parser's syntax error with text's FILE:LINE:COLUMN. */
void report_syntax(load_ctx *x, yaml_parser_t *p, const char *text, size_t len);
/*
 * config_yaml_doc.c: the next document of p's stream into doc, built from
 * events (nesting capped, aliases shared and their expansion bounded). 1
 * when doc was built (the caller frees it with ydoc_free), 0 at the end of the stream,
 * -1 after reporting (nothing to free).
 */
int build_document(load_ctx *x, yaml_parser_t *p, ydoc *doc, const char *text, size_t len);
/** Parse text as file number `file` of the load and walk it; errors go to st. */
void load_text(load_state *st, unsigned file, unsigned depth, const char *text, size_t len);

/* config_yaml_app.c: the `app` key (spec string or mapping) and `mounts`. */
void set_app(load_ctx *x, const key_def *k, const ynode *n, const char *path);
void set_mounts(load_ctx *x, const key_def *k, const ynode *n, const char *path);
/* The top-level `worker_pool:`: the pool of every PSGI app of the config,
 * for a config whose top-level app is not one (app.worker_pool's twin). */
void set_worker_pool(load_ctx *x, const key_def *k, const ynode *n, const char *path);
void set_preload(load_ctx *x, const key_def *k, const ynode *n, const char *path);
void set_debug(load_ctx *x, const key_def *k, const ynode *n, const char *path);
/** Release what the app keys remembered about x's document. */
void app_memo_free(load_ctx *x);

/* config_yaml_listen.c: `listen` (addresses, or {address, mode, owner, group} mappings). */
void set_listen(load_ctx *x, const key_def *k, const ynode *n, const char *path);
/* A listen entry's `tls:` mapping (config_yaml_tls.c); 0 with *out owned by
 * the caller, or -1 after reporting. */
int config_tls_parse(load_ctx *x, const ynode *n, pagid_tls **out);
/* A groups list (listen.tls.groups or tls.groups, named by path) into *out
 * as OpenSSL's names joined by ':' (an old value freed) and *pos; 0, or -1
 * after reporting (*out untouched). */
int config_tls_groups_parse(load_ctx *x, const ynode *n, const char *path, char **out,
                            pagid_pos *pos);
/* The top-level `tls.groups`: every TLS listener's default. */
void set_tls_groups(load_ctx *x, const key_def *k, const ynode *n, const char *path);

/** A YAML 1.1 boolean (true/false/yes/no/on/off); 0, or -1 after reporting (config_yaml_app.c). */
int parse_bool(load_ctx *x, const ynode *n, const char *path, int *out);
/* config_yaml_pubsub.c: `pubsub.backend`, `pubsub.url`, `pubsub.prefix`. */
void set_pubsub_backend(load_ctx *x, const key_def *k, const ynode *n, const char *path);
void set_pubsub_url(load_ctx *x, const key_def *k, const ynode *n, const char *path);
void set_pubsub_prefix(load_ctx *x, const key_def *k, const ynode *n, const char *path);
void set_pubsub_origins(load_ctx *x, const key_def *k, const ynode *n, const char *path);
/* config_yaml_shdict.c: `shared_dicts` (a list of {name, size}). */
void set_shared_dicts(load_ctx *x, const key_def *k, const ynode *n, const char *path);
/* config_yaml_include.c: `include` (paths and globs of files merged into this one). */
void set_include(load_ctx *x, const key_def *k, const ynode *n, const char *path);
/**
 * Read all of fd (at most MAX_FILE_SIZE) into out; size_hint: its size when
 * known (a regular file's st_size), else 0. 0, or -1 with *problem (a static
 * string). Does not close fd.
 */
int read_config_fd(int fd, size_t size_hint, buf *out, const char **problem);

#endif

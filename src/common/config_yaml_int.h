/*
 * config_yaml_int.h - what the parts of the YAML loader share: the
 * walk's context, the key table row, error reporting with FILE:LINE:COLUMN,
 * and node helpers. config_yaml.c walks the document and sets plain values;
 * config_yaml_app.c parses the app spec forms and the mounts list;
 * config_yaml_listen.c the listen list.
 */
#ifndef PAGID_CONFIG_YAML_INT_H
#define PAGID_CONFIG_YAML_INT_H

#include <stdio.h>
#include <yaml.h>

#include "config.h"

typedef struct load_ctx {
    pagid_config *c;
    yaml_document_t *doc;
    const char *name;
    FILE *err;
    int errors;
    const yaml_node_t *high_node, *low_node; /* cross-checked after the walk */
} load_ctx;

struct key_def;
typedef void (*key_handler)(load_ctx *x, const struct key_def *k, yaml_node_t *n, const char *path);

typedef struct key_def {
    const char *name;
    key_handler set;
    size_t off;                /* field in pagid_config */
    const struct key_def *sub; /* sections: their keys */
    size_t min, max;           /* sizes and counts */
} key_def;

/** Report a problem at a 1-based line and column; counts the error. */
void report_at(load_ctx *x, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define report(x, node, ...)                                                                       \
    report_at((x), (node)->start_mark.line + 1, (node)->start_mark.column + 1, __VA_ARGS__)

#define FIELD(x, k, type) ((type *)((char *)(x)->c + (k)->off))

/** Where n starts, for the config's *_pos fields. */
pagid_pos node_pos(const yaml_node_t *n);
/** A short printable form of a node for messages. */
const char *printable(const yaml_node_t *n, char *out, size_t outlen);
/** "a list", "a mapping", "a value". */
const char *kind_name(const yaml_node_t *n);
yaml_node_t *node_at(load_ctx *x, int index);
/** An empty or ~/null plain scalar. */
int is_null(const yaml_node_t *n);
/** The scalar's text, or NULL after reporting why it cannot be one. */
const char *scalar(load_ctx *x, yaml_node_t *n, const char *path);

/* config_yaml_app.c: the `app` key (spec string or mapping) and `mounts`. */
void set_app(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path);
void set_mounts(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path);

/* config_yaml_listen.c: `listen` (addresses, or {address, mode, owner, group} mappings). */
void set_listen(load_ctx *x, const key_def *k, yaml_node_t *n, const char *path);

#endif

/*
 * ydoc.h - the config loader's compact YAML document: every node of one file
 * in one array, children as indexes in a second one, scalar text in a few
 * large blocks. libyaml's yaml_document_t mallocs a tag, a value and a child
 * stack per node, which was most of `pagid -t` on a large config.
 * config_yaml_doc.c fills one from libyaml's parser events.
 */
#ifndef PAGID_YDOC_H
#define PAGID_YDOC_H

#include <stddef.h>
#include <stdint.h>

/* ynode.flags, worked out once when the scalar is stored. */
#define YNODE_NULL 1     /* a plain empty, ~ or null scalar */
#define YNODE_HAS_NUL 2  /* the text holds a NUL byte ("\0" in double quotes) */
#define YNODE_ONE_LINE 4 /* libyaml's start and end marks are on one line */
#define YNODE_ANCHORED 8 /* has an anchor: aliases may share it */

/* A node, in 24 bytes: a large config has hundreds of thousands. Its place
 * in the file is 0-based, as libyaml's marks. */
typedef struct ynode {
    union {
        const char *value; /* scalar: its text, NUL-terminated; lives as long as the doc */
        uint32_t first;    /* sequence, mapping: index of the first child in the doc's kids */
    };
    uint32_t len; /* scalar: bytes in value; sequence: items; mapping: pairs */
    uint32_t line, col;
    uint8_t type;  /* yaml_node_type_t: YAML_SCALAR_NODE, _SEQUENCE_ or _MAPPING_ */
    uint8_t style; /* a scalar's yaml_scalar_style_t */
    uint8_t flags; /* YNODE_* */
} ynode;
_Static_assert(sizeof(ynode) <= 24, "a ynode grew");

struct ydoc_block;

/* One document. The root is node 0. */
typedef struct ydoc {
    ynode *nodes;
    size_t n_nodes, cap_nodes;
    uint32_t *kids; /* children of closed nodes: items, or key, value, key, value... */
    size_t n_kids, cap_kids;
    uint32_t *open; /* children of the nodes not yet closed, innermost last */
    size_t n_open, cap_open;
    struct ydoc_block *blocks; /* scalar text, newest first */
    char *text_at;             /* room left in the newest block */
    size_t text_room;
} ydoc;

#define YDOC_INIT                                                                                  \
    {                                                                                              \
        NULL, 0, 0, NULL, 0, 0, NULL, 0, 0, NULL, NULL, 0                                          \
    }

/* The ynode indexes fit in 32 bits: more nodes are refused. */
#define YDOC_MAX_NODES ((size_t)UINT32_MAX)

/**
 * Add a scalar of len bytes (a copy, NUL-terminated) with its style and
 * start line and column; end_line is the line of its end mark. Its index,
 * or -1 when out of memory or out of indexes.
 */
long ydoc_add_scalar(ydoc *d, const char *text, size_t len, int style, size_t line, size_t col,
                     size_t end_line);
/**
 * Open a sequence or mapping (type: YAML_SEQUENCE_NODE or YAML_MAPPING_NODE):
 * the nodes given to ydoc_add_child until ydoc_close are its children. Its
 * index, or -1.
 */
long ydoc_open(ydoc *d, int type, size_t line, size_t col, size_t end_line);
/** Give node to the innermost open node as its next child (a mapping: key, value, ...); 0 or -1. */
int ydoc_add_child(ydoc *d, uint32_t node);
/** Close node, the innermost open one: its children move into the doc's kids. 0 or -1. */
int ydoc_close(ydoc *d, uint32_t node);
/** Note that node has an anchor (YNODE_ANCHORED). */
static inline void ydoc_mark_anchored(ydoc *d, uint32_t node)
{
    d->nodes[node].flags |= YNODE_ANCHORED;
}
/** Release everything; d is empty (YDOC_INIT) afterwards. */
void ydoc_free(ydoc *d);

static inline const ynode *ydoc_root(const ydoc *d)
{
    return d->n_nodes ? &d->nodes[0] : NULL;
}
/** n's index in d, for tables about nodes. */
static inline size_t ydoc_index(const ydoc *d, const ynode *n)
{
    return (size_t)(n - d->nodes);
}
/** Item i of sequence n (i < n->len). */
static inline const ynode *ydoc_item(const ydoc *d, const ynode *n, size_t i)
{
    return &d->nodes[d->kids[n->first + i]];
}
/** Key and value of pair i of mapping n (i < n->len). */
static inline const ynode *ydoc_key(const ydoc *d, const ynode *n, size_t i)
{
    return &d->nodes[d->kids[n->first + 2 * i]];
}
static inline const ynode *ydoc_value(const ydoc *d, const ynode *n, size_t i)
{
    return &d->nodes[d->kids[n->first + 2 * i + 1]];
}

#endif

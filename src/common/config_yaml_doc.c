/*
 * config_yaml_doc.c - builds a file's document (ydoc.h) from libyaml's parser
 * events in one pass, instead of yaml_parser_load: nesting is capped as it is
 * met, anchors are found through a hash table (libyaml's loader scans a list
 * per alias), and the nodes that aliases add to the walk are counted, so a
 * "billion laughs" file or an alias of its own ancestor is refused at the
 * alias's FILE:LINE:COLUMN before anything walks it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_yaml_int.h"
#include "strtab.h"
#include "ydoc.h"

/* Our schema is 3 levels deep. libyaml's scanner is quadratic in nesting
 * depth, so a deep "[[[[..." would stall pagid -t for minutes: cap it. */
#define MAX_DEPTH 32

/* An anchored node and, once it is complete, how many nodes a walk of it
 * visits (aliases inside counted in full); 0 while it is still open. */
typedef struct anchor {
    uint32_t node;
    size_t expanded;
} anchor;

/* A sequence or mapping being built. */
typedef struct frame {
    uint32_t node;
    size_t started; /* b->visited when it opened */
    size_t anchor;  /* 1 + its index in b->anchors, or 0 */
} frame;

typedef struct builder {
    load_ctx *x;
    ydoc *doc;
    frame stack[MAX_DEPTH];
    int depth;
    size_t visited; /* nodes a walk of the document visits so far */
    strtab names;   /* anchor name -> 1 + index in anchors */
    anchor *anchors;
    size_t n_anchors, cap_anchors;
} builder;

/* An anchor's name for messages. */
static const char *shown(const char *name, char *out, size_t outlen)
{
    return printable_text(name, strlen(name), out, outlen);
}

#define report_mark(b, m, fmt, name)                                                               \
    do {                                                                                           \
        char shown_[80];                                                                           \
        report_at((b)->x, (m)->line + 1, (m)->column + 1, fmt,                                     \
                  shown(name, shown_, sizeof shown_));                                             \
    } while (0)

/* Remember node under name; 1 + its index, or 0 after reporting. */
static size_t add_anchor(builder *b, const char *name, uint32_t node, const yaml_mark_t *m)
{
    int added;
    size_t *slot = strtab_get(&b->names, name, strlen(name), 1, &added);
    if (!slot) {
        report_mark(b, m, "out of memory (anchor '&%s')", name);
        return 0;
    }
    if (!added) {
        report_mark(b, m, "found duplicate anchor '&%s'", name);
        return 0;
    }
    if (b->n_anchors == b->cap_anchors) {
        size_t cap = b->cap_anchors ? 2 * b->cap_anchors : 16;
        anchor *grown = realloc(b->anchors, cap * sizeof *grown);
        if (!grown) {
            report_mark(b, m, "out of memory (anchor '&%s')", name);
            return 0;
        }
        b->anchors = grown;
        b->cap_anchors = cap;
    }
    b->anchors[b->n_anchors] = (anchor){node, 0};
    *slot = ++b->n_anchors;
    ydoc_mark_anchored(b->doc, node);
    return *slot;
}

/* Attach a complete node to the open parent (the root has none); 0, or -1 when out of memory. */
static int attach(builder *b, uint32_t node)
{
    return b->depth ? ydoc_add_child(b->doc, node) : 0;
}

/* An alias: the anchored node itself (a shared node, as libyaml does), its walk counted. */
static int on_alias(builder *b, const yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    size_t *slot = strtab_get(&b->names, name, strlen(name), 0, NULL);
    if (!slot) {
        report_mark(b, &ev->start_mark, "found undefined alias '*%s'", name);
        return -1;
    }
    const anchor *a = &b->anchors[*slot - 1];
    if (a->expanded == 0) {
        report_mark(b, &ev->start_mark, "alias '*%s' refers to a node that contains it", name);
        return -1;
    }
    load_state *st = b->x->st;
    st->alias_nodes += a->expanded;
    if (a->expanded > MAX_ALIAS_NODES || st->alias_nodes > MAX_ALIAS_NODES) {
        char name_shown[80];
        report_at(b->x, ev->start_mark.line + 1, ev->start_mark.column + 1,
                  "aliases expand to more than %d nodes (at '*%s'): refusing a config that "
                  "repeats itself this much",
                  MAX_ALIAS_NODES, shown(name, name_shown, sizeof name_shown));
        return -1;
    }
    b->visited += a->expanded;
    return attach(b, a->node);
}

/* One node event; 0, or -1 after reporting. */
static int on_node(builder *b, const yaml_event_t *ev)
{
    const yaml_char_t *anchor_name = NULL;
    size_t line = ev->start_mark.line, col = ev->start_mark.column, end = ev->end_mark.line;
    long node;
    if (ev->type == YAML_ALIAS_EVENT)
        return on_alias(b, ev);
    if (ev->type == YAML_SCALAR_EVENT) {
        anchor_name = ev->data.scalar.anchor;
        node = ydoc_add_scalar(b->doc, (const char *)ev->data.scalar.value, ev->data.scalar.length,
                               ev->data.scalar.style, line, col, end);
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        anchor_name = ev->data.sequence_start.anchor;
        node = ydoc_open(b->doc, YAML_SEQUENCE_NODE, line, col, end);
    } else {
        anchor_name = ev->data.mapping_start.anchor;
        node = ydoc_open(b->doc, YAML_MAPPING_NODE, line, col, end);
    }
    if (node < 0) {
        report_at(b->x, line + 1, col + 1, "out of memory");
        return -1;
    }
    b->visited++;
    size_t a = 0;
    if (anchor_name &&
        !(a = add_anchor(b, (const char *)anchor_name, (uint32_t)node, &ev->start_mark)))
        return -1;
    if (ev->type == YAML_SCALAR_EVENT) {
        if (a)
            b->anchors[a - 1].expanded = 1;
        return attach(b, (uint32_t)node);
    }
    if (b->depth == MAX_DEPTH) {
        report_at(b->x, line + 1, col + 1, "nested more than %d levels deep", MAX_DEPTH);
        return -1;
    }
    b->stack[b->depth++] = (frame){(uint32_t)node, b->visited - 1, a};
    return 0;
}

static int on_end(builder *b)
{
    frame f = b->stack[--b->depth];
    if (f.anchor)
        b->anchors[f.anchor - 1].expanded = b->visited - f.started;
    if (ydoc_close(b->doc, f.node) < 0)
        return -1;
    return attach(b, f.node);
}

int build_document(load_ctx *x, yaml_parser_t *p, ydoc *doc, const char *text, size_t len)
{
    builder b = {.x = x, .doc = doc, .names = STRTAB_INIT};
    yaml_event_t ev;
    int rc = -1, in_doc = 0;
    for (;;) {
        if (!yaml_parser_parse(p, &ev)) {
            report_syntax(x, p, text, len);
            break;
        }
        int step = 0, done = 0, errors = x->st->errors;
        switch (ev.type) {
        case YAML_STREAM_START_EVENT:
            break;
        case YAML_STREAM_END_EVENT:
            rc = 0;
            done = 1;
            break;
        case YAML_DOCUMENT_START_EVENT:
            *doc = (ydoc)YDOC_INIT;
            in_doc = 1;
            break;
        case YAML_DOCUMENT_END_EVENT:
            rc = 1;
            done = 1;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            step = on_end(&b);
            break;
        default:
            step = on_node(&b, &ev);
            break;
        }
        if (step < 0 && x->st->errors == errors) /* a failed append */
            report_at(x, ev.start_mark.line + 1, ev.start_mark.column + 1, "out of memory");
        yaml_event_delete(&ev);
        if (done || step < 0)
            break;
    }
    if (rc != 1 && in_doc)
        ydoc_free(doc);
    strtab_free(&b.names);
    free(b.anchors);
    return rc;
}

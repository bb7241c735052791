/*
 * ydoc.c - storage of the compact YAML document (ydoc.h): arrays grown by
 * doubling, scalar text copied into 64 KiB blocks that never move (so node
 * values stay valid while the node array grows), and the children of open
 * nodes kept on one stack until their node closes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "ydoc.h"

#define BLOCK_SIZE (64 * 1024)

struct ydoc_block {
    struct ydoc_block *next;
    char text[];
};

/* Room for one more element of size elem in *v (n used of *cap); 0 or -1. */
static int reserve(void **v, size_t n, size_t *cap, size_t elem, size_t max)
{
    if (n < *cap)
        return 0;
    size_t want = *cap ? 2 * *cap : 64;
    if (want > max)
        want = max;
    if (n >= want || want > SIZE_MAX / elem)
        return -1;
    void *grown = realloc(*v, want * elem);
    if (!grown)
        return -1;
    *v = grown;
    *cap = want;
    return 0;
}

/* A place in the file as a ynode holds it (a string of over 4 GiB is clamped, not wrapped). */
static uint32_t narrow(size_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static long add_node(ydoc *d, int type, size_t line, size_t col, size_t end_line)
{
    if (reserve((void **)&d->nodes, d->n_nodes, &d->cap_nodes, sizeof *d->nodes, YDOC_MAX_NODES))
        return -1;
    ynode *n = &d->nodes[d->n_nodes];
    memset(n, 0, sizeof *n);
    n->type = (uint8_t)type;
    n->line = narrow(line);
    n->col = narrow(col);
    if (end_line == line)
        n->flags = YNODE_ONE_LINE;
    return (long)d->n_nodes++;
}

/* Room for len bytes and a NUL, in the newest block or a new one. */
static char *text_room(ydoc *d, size_t len)
{
    if (len < d->text_room)
        return d->text_at;
    size_t size = len + 1 > BLOCK_SIZE ? len + 1 : BLOCK_SIZE;
    struct ydoc_block *b = malloc(sizeof *b + size);
    if (!b)
        return NULL;
    b->next = d->blocks;
    d->blocks = b;
    d->text_at = b->text;
    d->text_room = size;
    return d->text_at;
}

static int is_null_word(const char *s, size_t len)
{
    return len == 0 || (len == 1 && s[0] == '~') ||
           (len == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

long ydoc_add_scalar(ydoc *d, const char *text, size_t len, int style, size_t line, size_t col,
                     size_t end_line)
{
    if (len >= UINT32_MAX)
        return -1;
    char *copy = text_room(d, len);
    long i = copy ? add_node(d, YAML_SCALAR_NODE, line, col, end_line) : -1;
    if (i < 0)
        return -1;
    memcpy(copy, text, len);
    copy[len] = '\0';
    d->text_at += len + 1;
    d->text_room -= len + 1;
    ynode *n = &d->nodes[i];
    n->value = copy;
    n->len = (uint32_t)len;
    n->style = (uint8_t)style;
    if (style == YAML_PLAIN_SCALAR_STYLE && is_null_word(text, len))
        n->flags |= YNODE_NULL;
    if (memchr(text, '\0', len))
        n->flags |= YNODE_HAS_NUL;
    return i;
}

long ydoc_open(ydoc *d, int type, size_t line, size_t col, size_t end_line)
{
    long i = add_node(d, type, line, col, end_line);
    if (i >= 0)
        d->nodes[i].first = (uint32_t)d->n_open; /* until it closes: where its children start */
    return i;
}

int ydoc_add_child(ydoc *d, uint32_t node)
{
    if (reserve((void **)&d->open, d->n_open, &d->cap_open, sizeof *d->open, UINT32_MAX))
        return -1;
    d->open[d->n_open++] = node;
    return 0;
}

int ydoc_close(ydoc *d, uint32_t node)
{
    ynode *n = &d->nodes[node];
    size_t from = n->first, count = d->n_open - from;
    if (d->n_kids + count > UINT32_MAX)
        return -1;
    if (d->n_kids + count > d->cap_kids) {
        size_t cap = d->cap_kids ? d->cap_kids : 256;
        while (cap < d->n_kids + count)
            cap *= 2;
        if (cap > SIZE_MAX / sizeof *d->kids)
            return -1;
        uint32_t *grown = realloc(d->kids, cap * sizeof *grown);
        if (!grown)
            return -1;
        d->kids = grown;
        d->cap_kids = cap;
    }
    if (count)
        memcpy(d->kids + d->n_kids, d->open + from, count * sizeof *d->kids);
    n->first = (uint32_t)d->n_kids;
    n->len = (uint32_t)(n->type == YAML_MAPPING_NODE ? count / 2 : count);
    d->n_kids += count;
    d->n_open = from;
    return 0;
}

void ydoc_free(ydoc *d)
{
    while (d->blocks) {
        struct ydoc_block *next = d->blocks->next;
        free(d->blocks);
        d->blocks = next;
    }
    free(d->nodes);
    free(d->kids);
    free(d->open);
    *d = (ydoc)YDOC_INIT;
}

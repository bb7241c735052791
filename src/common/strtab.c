/*
 * strtab.c - open addressing with linear probing, FNV-1a hashes, grown at
 * half load; no deletion (the loader's tables only grow, then are freed).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strtab.h"

static size_t hash_bytes(const char *s, size_t len)
{
    size_t h = (size_t)14695981039346656037ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= (size_t)1099511628211ULL;
    }
    return h;
}

static strtab_entry *find_slot(strtab_entry *slots, size_t cap, const char *key, size_t len,
                               size_t hash)
{
    for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
        strtab_entry *e = &slots[i];
        if (!e->key || (e->hash == hash && e->len == len && memcmp(e->key, key, len) == 0))
            return e;
    }
}

/* Rehash into cap slots (a power of two, more than there are keys); 0 or -1. */
static int grow(strtab *t, size_t cap)
{
    if (cap > SIZE_MAX / sizeof(strtab_entry))
        return -1;
    strtab_entry *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        strtab_entry *e = &t->slots[i];
        if (e->key)
            *find_slot(slots, cap, e->key, e->len, e->hash) = *e;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

size_t *strtab_get(strtab *t, const char *key, size_t len, int add, int *added)
{
    size_t hash = hash_bytes(key, len);
    if (added)
        *added = 0;
    if (t->cap) {
        strtab_entry *e = find_slot(t->slots, t->cap, key, len, hash);
        if (e->key)
            return &e->value;
    }
    if (!add)
        return NULL;
    if (2 * (t->n + 1) > t->cap && grow(t, t->cap ? t->cap * 2 : 16) < 0)
        return NULL;
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    strtab_entry *e = find_slot(t->slots, t->cap, key, len, hash);
    *e = (strtab_entry){copy, len, hash, 0};
    t->n++;
    if (added)
        *added = 1;
    return &e->value;
}

int strtab_reserve(strtab *t, size_t more)
{
    if (more > SIZE_MAX / 4 - t->n)
        return -1;
    size_t cap = t->cap ? t->cap : 16;
    while (2 * (t->n + more) > cap)
        cap *= 2;
    return cap == t->cap ? 0 : grow(t, cap);
}

void strtab_free(strtab *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].key);
    free(t->slots);
    *t = (strtab)STRTAB_INIT;
}

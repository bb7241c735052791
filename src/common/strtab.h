/*
 * strtab.h - a hash table from byte strings to a size_t, for the config
 * loader's checks that must stay linear in the size of a config: YAML
 * anchors, `lib` directories already added, mount paths already taken.
 */
#ifndef PAGID_STRTAB_H
#define PAGID_STRTAB_H

#include <stddef.h>

typedef struct strtab_entry {
    char *key; /* owned copy, NUL-terminated; NULL = empty slot */
    size_t len;
    size_t hash;
    size_t value;
} strtab_entry;

typedef struct strtab {
    strtab_entry *slots;
    size_t cap; /* 0 or a power of two */
    size_t n;
} strtab;

#define STRTAB_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/**
 * The value of key (len bytes, may hold NUL), or NULL when absent. With add,
 * an absent key is inserted (a copy) with value 0 and *added set to 1; NULL
 * then means out of memory. The pointer is valid until the next insertion.
 */
size_t *strtab_get(strtab *t, const char *key, size_t len, int add, int *added);
/**
 * Make room for `more` keys beyond those in t, so that adding them does not
 * rehash the table again and again; 0, or -1 when out of memory.
 */
int strtab_reserve(strtab *t, size_t more);
/** Release the table and its keys; it is empty (STRTAB_INIT) afterwards. */
void strtab_free(strtab *t);

#endif

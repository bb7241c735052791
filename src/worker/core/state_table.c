/*
 * state_table.c - copy-on-write key/pointer table for lifespan state.
 */
#include "state_table.h"

#include <stdlib.h>
#include <string.h>

typedef struct state_entry {
    char *key;
    void *value;
} state_entry;

struct state_table {
    int refs;
    size_t n;
    state_entry e[];
};

state_table *state_table_ref(state_table *t)
{
    if (t)
        t->refs++;
    return t;
}

void state_table_unref(state_table *t)
{
    if (!t || --t->refs > 0)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->e[i].key);
    free(t);
}

void *state_table_get(const state_table *t, const char *key)
{
    if (!t || !key)
        return NULL;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->e[i].key, key) == 0)
            return t->e[i].value;
    return NULL;
}

state_table *state_table_set(state_table *t, const char *key, void *value)
{
    size_t n = t ? t->n : 0;
    state_table *nt = malloc(sizeof *nt + (n + 1) * sizeof(state_entry));
    if (!nt)
        return NULL;
    nt->refs = 1;
    nt->n = 0;
    int replaced = 0;
    for (size_t i = 0; i < n; i++) {
        nt->e[i].key = strdup(t->e[i].key);
        if (!nt->e[i].key) {
            state_table_unref(nt);
            return NULL;
        }
        nt->n++;
        nt->e[i].value = t->e[i].value;
        if (strcmp(t->e[i].key, key) == 0) {
            nt->e[i].value = value;
            replaced = 1;
        }
    }
    if (!replaced) {
        nt->e[nt->n].key = strdup(key);
        if (!nt->e[nt->n].key) {
            state_table_unref(nt);
            return NULL;
        }
        nt->e[nt->n].value = value;
        nt->n++;
    }
    state_table_unref(t);
    return nt;
}

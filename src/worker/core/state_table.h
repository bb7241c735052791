/*
 * state_table.h - the lifespan `state` namespace: an immutable, refcounted
 * key -> pointer table. Setting a key makes a new table (copy on write), so
 * a request scope's shallow copy is just a reference until it writes.
 */
#ifndef PAGID_STATE_TABLE_H
#define PAGID_STATE_TABLE_H

typedef struct state_table state_table;

state_table *state_table_ref(state_table *t);
void state_table_unref(state_table *t);
void *state_table_get(const state_table *t, const char *key);
/** A table equal to t (may be NULL) with key set; t's reference is consumed. NULL on OOM. */
state_table *state_table_set(state_table *t, const char *key, void *value);

#endif

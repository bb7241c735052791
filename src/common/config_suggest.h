/*
 * config_suggest.h - "did you mean ...?" for the config loader: an edit
 * distance and a picker of the closest name among those valid at a place.
 */
#ifndef PAGID_CONFIG_SUGGEST_H
#define PAGID_CONFIG_SUGGEST_H

#include <stddef.h>

/* Longer words are never typos of a name of ours: no suggestion for them. */
#define SUGGEST_MAX_LEN 64

/**
 * Optimal string alignment distance (Damerau-Levenshtein where a swap of two
 * adjacent characters counts as one edit) between a and b, comparing ASCII
 * letters case-insensitively and '-' as '_'. SIZE_MAX when either is longer
 * than SUGGEST_MAX_LEN.
 */
size_t config_edit_distance(const char *a, size_t alen, const char *b, size_t blen);

/** A running pick of the candidate closest to word. */
typedef struct config_suggest {
    const char *word;
    size_t len;
    const char *best; /* NULL while no candidate is close enough */
    size_t best_dist;
} config_suggest;

void config_suggest_init(config_suggest *s, const char *word, size_t len);
/**
 * Consider one candidate. It is close enough when it differs only by case or
 * '-'/'_', or when it is at most 2 edits away and the edits are less than
 * half the length of the longer of the two; the closest wins, the first of
 * equals. NULL is ignored.
 */
void config_suggest_add(config_suggest *s, const char *candidate);
/** The pick, or NULL when nothing was close. */
const char *config_suggest_best(const config_suggest *s);

/** The closest of a NULL-terminated list of names, or NULL. */
const char *config_suggest_among(const char *word, size_t len, const char *const *names);

#endif

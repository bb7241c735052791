/*
 * config_suggest.c - the loader's "did you mean ...?": the closest valid
 * name to a misspelt key or value, by edit distance, or none when nothing
 * is close (a suggestion that is a guess is worse than none).
 */
#include "config_suggest.h"

#include <stdint.h>

/* Case and the '-'/'_' spelling of a separator are the commonest slips. */
static unsigned char fold(char ch)
{
    unsigned char c = (unsigned char)ch;
    if (c >= 'A' && c <= 'Z')
        return (unsigned char)(c - 'A' + 'a');
    return c == '-' ? '_' : c;
}

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t config_edit_distance(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen > SUGGEST_MAX_LEN || blen > SUGGEST_MAX_LEN)
        return SIZE_MAX;
    /* Three rows of the classic table: the swap looks two rows back. */
    size_t rows[3][SUGGEST_MAX_LEN + 1];
    size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= blen; j++)
        prev[j] = j;
    for (size_t i = 1; i <= alen; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= blen; j++) {
            size_t cost = fold(a[i - 1]) != fold(b[j - 1]);
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && fold(a[i - 1]) == fold(b[j - 2]) &&
                fold(a[i - 2]) == fold(b[j - 1]) && prev2[j - 2] + 1 < cur[j])
                cur[j] = prev2[j - 2] + 1;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[blen];
}

void config_suggest_init(config_suggest *s, const char *word, size_t len)
{
    s->word = word;
    s->len = len;
    s->best = NULL;
    s->best_dist = SIZE_MAX;
}

void config_suggest_add(config_suggest *s, const char *candidate)
{
    if (!candidate)
        return;
    size_t clen = 0;
    while (candidate[clen])
        clen++;
    size_t d = config_edit_distance(s->word, s->len, candidate, clen);
    size_t longer = clen > s->len ? clen : s->len;
    /* "id" is not a typo of "idle", nor "ab" of "app": two edits must stay a
     * small part of the word. */
    if (d > 2 || (d > 0 && 2 * d >= longer))
        return;
    if (d < s->best_dist) {
        s->best = candidate;
        s->best_dist = d;
    }
}

const char *config_suggest_best(const config_suggest *s)
{
    return s->best;
}

const char *config_suggest_among(const char *word, size_t len, const char *const *names)
{
    config_suggest s;
    config_suggest_init(&s, word, len);
    for (size_t i = 0; names[i]; i++)
        config_suggest_add(&s, names[i]);
    return config_suggest_best(&s);
}

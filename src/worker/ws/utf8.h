/*
 * utf8.h - an incremental UTF-8 validator (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). It keeps its state between calls, so
 * a text message can be checked fragment by fragment as its bytes arrive:
 * an invalid byte fails at once, a code point split across calls is fine.
 */
#ifndef PAGID_UTF8_H
#define PAGID_UTF8_H

#include <stddef.h>
#include <stdint.h>

typedef struct utf8_validator {
    uint8_t need;   /* continuation bytes still expected */
    uint8_t lo, hi; /* allowed range of the next continuation byte */
    uint8_t failed; /* sticky: an invalid byte was seen */
} utf8_validator;

#define UTF8_VALIDATOR_INIT                                                                        \
    {                                                                                              \
        0, 0x80, 0xBF, 0                                                                           \
    }

static inline void utf8_reset(utf8_validator *v)
{
    v->need = 0;
    v->lo = 0x80;
    v->hi = 0xBF;
    v->failed = 0;
}

/** Feed bytes; 0 while everything seen is a valid prefix, -1 once invalid. */
int utf8_feed(utf8_validator *v, const void *data, size_t len);
/** Is the text seen so far complete (no code point cut short)? */
static inline int utf8_complete(const utf8_validator *v)
{
    return !v->failed && v->need == 0;
}
/** Whole-string check: 1 if valid UTF-8, else 0. */
int utf8_valid(const void *data, size_t len);

#endif

/*
 * utf8.c - incremental UTF-8 validation as a small explicit state machine:
 * the lead byte fixes how many continuation bytes follow and the range the
 * first of them may take (that range is what rules out overlongs,
 * surrogates and code points above U+10FFFF). ASCII runs take a fast path.
 */
#include "utf8.h"

#include <string.h>

/* The lead byte decides the count and the first continuation byte's range. */
static int utf8_lead(utf8_validator *v, uint8_t b)
{
    v->lo = 0x80;
    v->hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        v->need = 1;
    } else if (b == 0xE0) {
        v->need = 2;
        v->lo = 0xA0; /* E0 80..9F would be overlong */
    } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
        v->need = 2;
    } else if (b == 0xED) {
        v->need = 2;
        v->hi = 0x9F; /* ED A0..BF would be a UTF-16 surrogate */
    } else if (b == 0xF0) {
        v->need = 3;
        v->lo = 0x90; /* F0 80..8F would be overlong */
    } else if (b >= 0xF1 && b <= 0xF3) {
        v->need = 3;
    } else if (b == 0xF4) {
        v->need = 3;
        v->hi = 0x8F; /* F4 90.. would be above U+10FFFF */
    } else {
        return -1; /* 80..C1 (stray continuation, overlong lead), F5..FF */
    }
    return 0;
}

int utf8_feed(utf8_validator *v, const void *data, size_t len)
{
    const uint8_t *p = data, *end = p + len;
    if (v->failed)
        return -1;
    while (p < end) {
        if (v->need == 0) {
            /* Fast path: eight ASCII bytes at a time. */
            while (end - p >= 8) {
                uint64_t w;
                memcpy(&w, p, 8);
                if (w & 0x8080808080808080ull)
                    break;
                p += 8;
            }
            if (p == end)
                break;
            uint8_t b = *p++;
            if (b < 0x80)
                continue;
            if (utf8_lead(v, b) < 0) {
                v->failed = 1;
                return -1;
            }
            continue;
        }
        uint8_t b = *p++;
        if (b < v->lo || b > v->hi) {
            v->failed = 1;
            return -1;
        }
        v->need--;
        v->lo = 0x80;
        v->hi = 0xBF;
    }
    return 0;
}

int utf8_valid(const void *data, size_t len)
{
    utf8_validator v = UTF8_VALIDATOR_INIT;
    return utf8_feed(&v, data, len) == 0 && utf8_complete(&v);
}

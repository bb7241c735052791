/*
 * fuzz_utf8.c - libFuzzer harness for the incremental UTF-8 validator
 * (src/worker/utf8.c): the whole-string answer must match a plainly written
 * reference decoder; feeding the same bytes in pieces (cut where the input's
 * first byte says) or byte by byte must give the same answer; a failure is
 * sticky; and the byte-by-byte run must fail no later than the first byte
 * after which the reference finds the text invalid. Built by run.sh only.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ws/utf8.h"

/* RFC 3629, code point by code point: 1 valid, 0 invalid, -1 valid but cut short. */
static int ref_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        size_t k;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1;
            c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2;
            c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3;
            c &= 0x07;
        } else {
            return 0;
        }
        size_t j = 1;
        for (; j <= k && i + j < n; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            c = (c << 6) | (s[i + j] & 0x3F);
        }
        if (j <= k) {
            /* Cut short: still a valid prefix only if no completion is ruled out already. */
            uint32_t lo = c, hi = c;
            for (size_t r = j; r <= k; r++) {
                lo = lo << 6;
                hi = (hi << 6) | 0x3F;
            }
            uint32_t min = k == 1 ? 0x80 : k == 2 ? 0x800 : 0x10000;
            if (hi < min || lo > 0x10FFFF || (lo >= 0xD800 && hi <= 0xDFFF))
                return 0;
            return -1;
        }
        uint32_t min = k == 1 ? 0x80 : k == 2 ? 0x800 : 0x10000;
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t stride = 1 + data[0] % 7;
    const uint8_t *p = data + 1;
    size_t n = size - 1;

    int ref = ref_utf8(p, n);
    int whole = utf8_valid(p, n);
    if (whole != (ref == 1))
        abort();

    utf8_validator v = UTF8_VALIDATOR_INIT;
    int failed = 0;
    for (size_t off = 0; off < n; off += stride) {
        size_t k = n - off < stride ? n - off : stride;
        if (utf8_feed(&v, p + off, k) < 0)
            failed = 1;
        else if (failed)
            abort(); /* sticky */
    }
    if (utf8_complete(&v) != whole || failed != (ref == 0))
        abort();

    /* Fail fast: the validator fails exactly at the first byte that makes the prefix invalid. */
    utf8_validator b = UTF8_VALIDATOR_INIT;
    for (size_t i = 0; i < n; i++) {
        int bad_now = utf8_feed(&b, p + i, 1) < 0;
        int ref_prefix_bad = ref_utf8(p, i + 1) == 0;
        if (bad_now != ref_prefix_bad)
            abort();
        if (bad_now)
            break;
    }
    return 0;
}

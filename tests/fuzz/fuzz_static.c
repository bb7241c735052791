/*
 * fuzz_static.c - libFuzzer harness for the static app's parsers: path
 * normalisation (the result never climbs, never has an empty, "." or ".."
 * segment, never a hidden one), Range (the range lies inside the file),
 * HTTP-dates (what parses formats and parses back the same), entity-tag
 * lists and the precondition evaluation. Built from
 * src/worker/apps/static_path.c and static_http.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/apps/static_http.h"
#include "worker/apps/static_path.h"

static void check_normalized(const char *out, int dir_form)
{
    (void)dir_form;
    size_t n = strlen(out);
    if (n >= STATIC_PATH_MAX || (n && (out[0] == '/' || out[n - 1] == '/')))
        abort();
    for (const char *seg = out; *seg;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        if (len == 0 || seg[0] == '.')
            abort(); /* empty, ".", ".." or hidden */
        seg += len + (end ? 1 : 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *s = (const char *)data;
    char out[STATIC_PATH_MAX];
    int dir_form = -1;
    if (static_path_normalize(s, size, out, &dir_form) == STATIC_PATH_OK)
        check_normalized(out, dir_form);

    pagi_str v = {s, size};
    int64_t fsize = (int64_t)(data[0] % 4 == 0 ? 0 : data[0] % 4 == 1 ? 100 : (INT64_C(5) << 30));
    int64_t first = -1, last = -1;
    if (static_parse_range(v, fsize, &first, &last) == STATIC_RANGE_OK &&
        (first < 0 || last < first || last >= fsize))
        abort();

    int64_t t;
    if (static_parse_http_date(s, size, &t) == 0 && t >= 0 && t < INT64_C(253402300800)) {
        char d[STATIC_DATE_MAX];
        int64_t back;
        size_t n = static_http_date(d, t);
        if (n && (static_parse_http_date(d, n, &back) != 0 || back != t))
            abort();
    }

    char etag[STATIC_ETAG_MAX];
    size_t el = static_etag(etag, 1234567890123456789, 42);
    static_validators val;
    memset(&val, 0, sizeof val);
    val.has_if_none_match = val.has_if_match = val.has_if_range = val.has_if_modified = 1;
    val.if_none_match = val.if_match = val.if_range = val.if_modified = v;
    val.now = 2000000000;
    static_cond c = static_evaluate(&val, etag, el, 1700000000);
    if (c < STATIC_COND_FULL || c > STATIC_COND_PRECONDITION)
        abort();
    (void)static_etag_list_match(v, etag, el, data[0] & 1);
    return 0;
}

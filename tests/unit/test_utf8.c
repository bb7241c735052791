/*
 * test_utf8.c - Check suite for src/worker/utf8.c: valid text of every
 * length class, the Autobahn 6.x failures (overlongs, surrogates, code
 * points above U+10FFFF, stray and missing continuation bytes), and
 * incremental feeding: a code point split anywhere is fine, a bad byte
 * fails the moment it is fed.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "worker/ws/utf8.h"

typedef struct sample {
    const char *bytes;
    size_t len;
} sample;

#define S(lit)                                                                                     \
    {                                                                                              \
        lit, sizeof lit - 1                                                                        \
    }

static const sample valid[] = {
    S(""),
    S("Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!"),
    S("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"), /* Autobahn 6.2 "kosme" */
    S("\x00"),
    S("\x7f"),
    S("\xc2\x80"),
    S("\xdf\xbf"),
    S("\xe0\xa0\x80"),
    S("\xef\xbf\xbf"),     /* U+FFFF (a noncharacter, still valid UTF-8) */
    S("\xed\x9f\xbf"),     /* U+D7FF, just below the surrogates */
    S("\xee\x80\x80"),     /* U+E000, just above */
    S("\xf0\x90\x80\x80"), /* U+10000 */
    S("\xf4\x8f\xbf\xbf"), /* U+10FFFF */
    S("\xef\xbb\xbf"),     /* BOM */
};

static const sample invalid[] = {
    S("\x80"), /* stray continuation */
    S("\xbf"),
    S("\xc0\x80"),     /* overlong NUL */
    S("\xc1\xbf"),     /* overlong */
    S("\xe0\x80\xaf"), /* overlong '/' */
    S("\xe0\x9f\xbf"),
    S("\xf0\x80\x80\xaf"),
    S("\xf0\x8f\xbf\xbf"),
    S("\xf8\x88\x80\x80\x80"), /* 5-byte form */
    S("\xfc\x84\x80\x80\x80\x80"),
    S("\xed\xa0\x80"),             /* U+D800 surrogate */
    S("\xed\xbf\xbf"),             /* U+DFFF */
    S("\xed\xa0\x80\xed\xb0\x80"), /* a surrogate pair spelled in UTF-8 */
    S("\xf4\x90\x80\x80"),         /* U+110000 */
    S("\xf7\xbf\xbf\xbf"),
    S("\xfe"),
    S("\xff"),
    S("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80\x65\x64\x69\x74\x65\x64"), /* 6.3 */
    S("\xc2\x41"), /* lead then ASCII */
    S("\xe1\x80\x41"),
};

static const sample truncated[] = {
    S("\xc2"),
    S("\xe0\xa0"),
    S("\xf0\x90\x80"),
    S("abc\xf4\x8f\xbf"),
};

START_TEST(valid_whole)
{
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        ck_assert_msg(utf8_valid(valid[i].bytes, valid[i].len), "sample %zu", i);
}
END_TEST

START_TEST(invalid_whole)
{
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        ck_assert_msg(!utf8_valid(invalid[i].bytes, invalid[i].len), "sample %zu", i);
}
END_TEST

START_TEST(truncated_is_incomplete_not_invalid)
{
    for (size_t i = 0; i < sizeof truncated / sizeof truncated[0]; i++) {
        utf8_validator v = UTF8_VALIDATOR_INIT;
        ck_assert_int_eq(utf8_feed(&v, truncated[i].bytes, truncated[i].len), 0);
        ck_assert(!utf8_complete(&v));
        ck_assert(!utf8_valid(truncated[i].bytes, truncated[i].len));
    }
}
END_TEST

/* Every split point of every valid sample, fed in two pieces and byte by byte. */
START_TEST(valid_split_anywhere)
{
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
        for (size_t cut = 0; cut <= valid[i].len; cut++) {
            utf8_validator v = UTF8_VALIDATOR_INIT;
            ck_assert_int_eq(utf8_feed(&v, valid[i].bytes, cut), 0);
            ck_assert_int_eq(utf8_feed(&v, valid[i].bytes + cut, valid[i].len - cut), 0);
            ck_assert(utf8_complete(&v));
        }
        utf8_validator v = UTF8_VALIDATOR_INIT;
        for (size_t k = 0; k < valid[i].len; k++)
            ck_assert_int_eq(utf8_feed(&v, valid[i].bytes + k, 1), 0);
        ck_assert(utf8_complete(&v));
    }
}
END_TEST

/* Fail fast: the byte that makes the text invalid fails its own feed call. */
START_TEST(invalid_fails_at_the_bad_byte)
{
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        utf8_validator v = UTF8_VALIDATOR_INIT;
        size_t k = 0;
        int rc = 0;
        for (; k < invalid[i].len; k++)
            if ((rc = utf8_feed(&v, invalid[i].bytes + k, 1)) < 0)
                break;
        ck_assert_msg(rc < 0, "sample %zu never failed", i);
        /* Sticky: nothing after a failure makes it valid again. */
        ck_assert_int_eq(utf8_feed(&v, "a", 1), -1);
        ck_assert(!utf8_complete(&v));
    }
}
END_TEST

/* Autobahn 6.4: the first fragment already holds the bad bytes; the rest never came. */
START_TEST(first_fragment_fails_before_the_rest)
{
    static const char frag1[] = "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90\x80\x80";
    utf8_validator v = UTF8_VALIDATOR_INIT;
    ck_assert_int_eq(utf8_feed(&v, frag1, sizeof frag1 - 1), -1);
    utf8_validator w = UTF8_VALIDATOR_INIT;
    ck_assert_int_eq(utf8_feed(&w, "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4", 12), 0);
    ck_assert_int_eq(utf8_feed(&w, "\x90", 1), -1);
}
END_TEST

START_TEST(long_ascii_fast_path)
{
    char buf[1000];
    memset(buf, 'a', sizeof buf);
    ck_assert(utf8_valid(buf, sizeof buf));
    buf[997] = (char)0x80;
    ck_assert(!utf8_valid(buf, sizeof buf));
    buf[997] = (char)0xc3;
    buf[998] = (char)0xa9;
    ck_assert(utf8_valid(buf, sizeof buf));
}
END_TEST

/* Exhaustive over every 1..3-byte sequence against a reference decoder. */
static int reference_valid(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t k;
        unsigned cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (p[i + j] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + j] & 0x3f);
        }
        unsigned min = k == 1 ? 0x80 : k == 2 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

START_TEST(exhaustive_three_bytes)
{
    unsigned char b[3];
    for (unsigned x = 0; x < 256; x++)
        for (unsigned y = 0; y < 256; y++)
            for (unsigned z = 0; z < 256; z += (x >= 0xe0 ? 1 : 17)) {
                b[0] = (unsigned char)x;
                b[1] = (unsigned char)y;
                b[2] = (unsigned char)z;
                if (utf8_valid(b, 3) != reference_valid(b, 3))
                    ck_abort_msg("%02x %02x %02x", x, y, z);
            }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("utf8");
    TCase *t = tcase_create("whole");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, valid_whole);
    tcase_add_test(t, invalid_whole);
    tcase_add_test(t, truncated_is_incomplete_not_invalid);
    tcase_add_test(t, long_ascii_fast_path);
    tcase_add_test(t, exhaustive_three_bytes);
    suite_add_tcase(s, t);
    t = tcase_create("incremental");
    tcase_add_test(t, valid_split_anywhere);
    tcase_add_test(t, invalid_fails_at_the_bad_byte);
    tcase_add_test(t, first_fragment_fails_before_the_rest);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * test_h2_mem.c - Check suite for src/worker/http2/h2_mem.c: nghttp2's
 * allocator keeps freed small blocks for reuse, at most 16 a size, gives
 * large ones back at once, and keeps calloc/realloc's contracts.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/http2/h2_mem.h"

START_TEST(test_small_blocks_are_reused_and_bounded)
{
    nghttp2_mem *m = h2_mem();
    h2_mem_release();
    void *p = m->malloc(100, m->mem_user_data);
    ck_assert_ptr_nonnull(p);
    memset(p, 7, 100);
    m->free(p, m->mem_user_data);
#if defined(__SANITIZE_ADDRESS__)
    ck_assert_uint_eq(h2_mem_kept(), 0);
#else
    ck_assert_uint_eq(h2_mem_kept(), 1);
    void *q = m->malloc(120, m->mem_user_data); /* the same 128-byte class */
    ck_assert_ptr_eq(q, p);
    ck_assert_uint_eq(h2_mem_kept(), 0);
    m->free(q, m->mem_user_data);
    void *v[40];
    for (int i = 0; i < 40; i++)
        v[i] = m->malloc(64, m->mem_user_data);
    for (int i = 0; i < 40; i++)
        m->free(v[i], m->mem_user_data);
    ck_assert_uint_eq(h2_mem_kept(), 1 + 16); /* the 128 one, and 16 of the forty */
#endif
    void *big = m->malloc(100000, m->mem_user_data);
    ck_assert_ptr_nonnull(big);
    size_t before = h2_mem_kept();
    m->free(big, m->mem_user_data);
    ck_assert_uint_eq(h2_mem_kept(), before); /* large blocks are never kept */
    m->free(NULL, m->mem_user_data);
    h2_mem_release();
    ck_assert_uint_eq(h2_mem_kept(), 0);
}
END_TEST

START_TEST(test_calloc_and_realloc)
{
    nghttp2_mem *m = h2_mem();
    unsigned char *p = m->malloc(64, m->mem_user_data);
    memset(p, 0xff, 64);
    m->free(p, m->mem_user_data);
    unsigned char *z = m->calloc(8, 8, m->mem_user_data); /* may be the same block: zeroed */
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(z[i], 0);
    ck_assert_ptr_null(m->calloc(SIZE_MAX / 2, 4, m->mem_user_data));
    for (int i = 0; i < 64; i++)
        z[i] = (unsigned char)i;
    unsigned char *r = m->realloc(z, 5000, m->mem_user_data); /* past the largest class */
    ck_assert_ptr_nonnull(r);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(r[i], (unsigned)i);
    r = m->realloc(r, 10, m->mem_user_data); /* shrinking keeps the block */
    ck_assert_uint_eq(r[9], 9);
    ck_assert_ptr_null(m->realloc(r, 0, m->mem_user_data)); /* freed, as glibc's */
    void *n = m->realloc(NULL, 30, m->mem_user_data);
    ck_assert_ptr_nonnull(n);
    m->free(n, m->mem_user_data);
    h2_mem_release();
}
END_TEST

/* The module's own blocks (streams) come zeroed from the same lists. */
START_TEST(test_module_blocks)
{
    h2_mem_release();
    unsigned char *p = h2_mem_calloc(744);
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < 744; i++)
        ck_assert_uint_eq(p[i], 0);
    memset(p, 0xee, 744);
    h2_mem_free(p);
#if !defined(__SANITIZE_ADDRESS__)
    ck_assert_uint_eq(h2_mem_kept(), 1);
#endif
    unsigned char *q = h2_mem_calloc(1000); /* the same 1 KiB class: zeroed again */
    for (int i = 0; i < 1000; i++)
        ck_assert_uint_eq(q[i], 0);
    h2_mem_free(q);
    h2_mem_free(NULL);
    h2_mem_release();
    ck_assert_uint_eq(h2_mem_kept(), 0);
}
END_TEST

/* Each class holds sizes from just past the one below up to its own: a
 * block freed at one size is reused for any size of its class, never for
 * a size of another, and holds every byte asked for (filled here, so
 * AddressSanitizer would see a block too small). */
START_TEST(test_class_boundaries)
{
    nghttp2_mem *m = h2_mem();
    h2_mem_release();
    for (size_t c = 64; c <= 2048; c *= 2) {
        size_t low = c == 64 ? 1 : c / 2 + 1;
        void *p = m->malloc(c, m->mem_user_data);
        memset(p, 0xab, c);
        m->free(p, m->mem_user_data);
        void *q = m->malloc(low, m->mem_user_data); /* the same class */
        memset(q, 0xcd, low);
        void *r = m->malloc(c + 1, m->mem_user_data); /* the next class, or malloc's */
        memset(r, 0xef, c + 1);
#if !defined(__SANITIZE_ADDRESS__)
        ck_assert_msg(q == p, "class %zu: %zu reuses its block", c, low);
        ck_assert_msg(r != p, "class %zu: %zu does not", c, c + 1);
#endif
        m->free(q, m->mem_user_data);
        m->free(r, m->mem_user_data);
        h2_mem_release();
    }
}
END_TEST

static Suite *h2_mem_suite(void)
{
    Suite *s = suite_create("h2_mem");
    TCase *tc = tcase_create("blocks");
    tcase_add_test(tc, test_small_blocks_are_reused_and_bounded);
    tcase_add_test(tc, test_calloc_and_realloc);
    tcase_add_test(tc, test_module_blocks);
    tcase_add_test(tc, test_class_boundaries);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(h2_mem_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

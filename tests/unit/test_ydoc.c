/*
 * test_ydoc.c - Check suite for src/common/ydoc.c, the config loader's
 * compact YAML document: scalars (copies, flags, text larger than a block),
 * nested sequences and mappings closed into the kids array, shared nodes,
 * and positions.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/ydoc.h"

START_TEST(test_scalars)
{
    ydoc d = YDOC_INIT;
    char text[] = "hello";
    long a = ydoc_add_scalar(&d, text, 5, YAML_PLAIN_SCALAR_STYLE, 2, 4, 2);
    ck_assert_int_eq(a, 0);
    text[0] = 'J'; /* a copy was kept */
    const ynode *n = &d.nodes[a];
    ck_assert_int_eq(n->type, YAML_SCALAR_NODE);
    ck_assert_str_eq(n->value, "hello");
    ck_assert_uint_eq(n->len, 5);
    ck_assert_uint_eq(n->line, 2);
    ck_assert_uint_eq(n->col, 4);
    ck_assert_uint_eq(n->flags, YNODE_ONE_LINE);
    /* Null words count only when plain. */
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    for (size_t i = 0; i < 5; i++) {
        long k = ydoc_add_scalar(&d, nulls[i], strlen(nulls[i]), YAML_PLAIN_SCALAR_STYLE, 0, 0, 1);
        ck_assert_int_ge(k, 0);
        ck_assert_uint_eq(d.nodes[k].flags, YNODE_NULL);
        k = ydoc_add_scalar(&d, nulls[i], strlen(nulls[i]), YAML_SINGLE_QUOTED_SCALAR_STYLE, 0, 0,
                            1);
        ck_assert_uint_eq(d.nodes[k].flags, 0);
    }
    long k = ydoc_add_scalar(&d, "nul", 3, YAML_PLAIN_SCALAR_STYLE, 0, 0, 0);
    ck_assert_uint_eq(d.nodes[k].flags & YNODE_NULL, 0);
    k = ydoc_add_scalar(&d, "a\0b", 3, YAML_DOUBLE_QUOTED_SCALAR_STYLE, 0, 0, 0);
    ck_assert_uint_eq(d.nodes[k].flags & YNODE_HAS_NUL, YNODE_HAS_NUL);
    ck_assert_int_eq(memcmp(d.nodes[k].value, "a\0b", 4), 0);
    ck_assert_str_eq(d.nodes[a].value, "hello");
    ydoc_free(&d);
    ck_assert_ptr_null(d.nodes);
    ck_assert_uint_eq(d.n_nodes, 0);
}
END_TEST

/* Values stay where they are while the node array grows and blocks fill. */
START_TEST(test_text_blocks)
{
    ydoc d = YDOC_INIT;
    size_t big = 200 * 1024;
    char *huge = malloc(big);
    ck_assert_ptr_nonnull(huge);
    memset(huge, 'x', big);
    long first = ydoc_add_scalar(&d, "first", 5, YAML_PLAIN_SCALAR_STYLE, 0, 0, 0);
    const char *kept = d.nodes[first].value;
    long h = ydoc_add_scalar(&d, huge, big, YAML_PLAIN_SCALAR_STYLE, 1, 0, 1);
    ck_assert_int_ge(h, 0);
    ck_assert_uint_eq(d.nodes[h].len, big);
    ck_assert_int_eq(d.nodes[h].value[big], '\0');
    ck_assert_int_eq(memcmp(d.nodes[h].value, huge, big), 0);
    for (int i = 0; i < 100000; i++)
        ck_assert_int_ge(ydoc_add_scalar(&d, "abcdefgh", 8, YAML_PLAIN_SCALAR_STYLE, 2, 0, 2), 0);
    ck_assert_ptr_eq(d.nodes[first].value, kept);
    ck_assert_str_eq(d.nodes[first].value, "first");
    ck_assert_str_eq(d.nodes[100000].value, "abcdefgh");
    free(huge);
    ydoc_free(&d);
}
END_TEST

/* {a: [1, 2], b: {}} with the list shared as an alias would be: [x, *list]. */
START_TEST(test_nesting)
{
    ydoc d = YDOC_INIT;
    long map = ydoc_open(&d, YAML_MAPPING_NODE, 0, 0, 0);
    ck_assert_int_eq(map, 0);
    long a = ydoc_add_scalar(&d, "a", 1, YAML_PLAIN_SCALAR_STYLE, 0, 1, 0);
    ck_assert_int_eq(ydoc_add_child(&d, (uint32_t)a), 0);
    long list = ydoc_open(&d, YAML_SEQUENCE_NODE, 0, 4, 0);
    long one = ydoc_add_scalar(&d, "1", 1, YAML_PLAIN_SCALAR_STYLE, 0, 5, 0);
    ydoc_add_child(&d, (uint32_t)one);
    long two = ydoc_add_scalar(&d, "2", 1, YAML_PLAIN_SCALAR_STYLE, 0, 8, 0);
    ydoc_add_child(&d, (uint32_t)two);
    ck_assert_int_eq(ydoc_close(&d, (uint32_t)list), 0);
    ydoc_add_child(&d, (uint32_t)list);
    long b = ydoc_add_scalar(&d, "b", 1, YAML_PLAIN_SCALAR_STYLE, 0, 12, 0);
    ydoc_add_child(&d, (uint32_t)b);
    long empty = ydoc_open(&d, YAML_MAPPING_NODE, 0, 15, 0);
    ck_assert_int_eq(ydoc_close(&d, (uint32_t)empty), 0);
    ydoc_add_child(&d, (uint32_t)empty);
    ck_assert_int_eq(ydoc_close(&d, (uint32_t)map), 0);
    ck_assert_uint_eq(d.n_open, 0);

    const ynode *root = ydoc_root(&d);
    ck_assert_ptr_eq(root, &d.nodes[0]);
    ck_assert_int_eq(root->type, YAML_MAPPING_NODE);
    ck_assert_uint_eq(root->len, 2);
    ck_assert_str_eq(ydoc_key(&d, root, 0)->value, "a");
    const ynode *l = ydoc_value(&d, root, 0);
    ck_assert_int_eq(l->type, YAML_SEQUENCE_NODE);
    ck_assert_uint_eq(l->len, 2);
    ck_assert_str_eq(ydoc_item(&d, l, 0)->value, "1");
    ck_assert_str_eq(ydoc_item(&d, l, 1)->value, "2");
    ck_assert_uint_eq(ydoc_item(&d, l, 1)->col, 8);
    ck_assert_uint_eq(ydoc_index(&d, l), (size_t)list);
    ck_assert_str_eq(ydoc_key(&d, root, 1)->value, "b");
    ck_assert_uint_eq(ydoc_value(&d, root, 1)->len, 0);

    /* A second top-level sequence sharing the list, as an alias does. */
    long seq = ydoc_open(&d, YAML_SEQUENCE_NODE, 3, 0, 3);
    long x = ydoc_add_scalar(&d, "x", 1, YAML_PLAIN_SCALAR_STYLE, 3, 1, 3);
    ydoc_add_child(&d, (uint32_t)x);
    ydoc_add_child(&d, (uint32_t)list);
    ck_assert_int_eq(ydoc_close(&d, (uint32_t)seq), 0);
    ck_assert_ptr_eq(ydoc_item(&d, &d.nodes[seq], 1), l);
    ydoc_free(&d);
}
END_TEST

START_TEST(test_empty)
{
    ydoc d = YDOC_INIT;
    ck_assert_ptr_null(ydoc_root(&d));
    ydoc_free(&d); /* nothing to free is fine */
    ydoc_free(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ydoc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_scalars);
    tcase_add_test(tc, test_text_blocks);
    tcase_add_test(tc, test_nesting);
    tcase_add_test(tc, test_empty);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

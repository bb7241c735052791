/*
 * config_load_check.h - what the config loader's Check suites share: load
 * a YAML text as "t.yaml" over fresh defaults, keeping what the loader
 * printed, and assert one exact "FILE:LINE:COLUMN: message" or none.
 */
#ifndef PAGID_TEST_CONFIG_LOAD_CHECK_H
#define PAGID_TEST_CONFIG_LOAD_CHECK_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/config.h"

static char *out_text; /* what the loader printed, for the last load */

/* Load yaml over fresh defaults as "t.yaml"; returns the error count. */
static inline int load(pagid_config *c, const char *yaml)
{
    size_t len;
    free(out_text);
    FILE *f = open_memstream(&out_text, &len);
    ck_assert_ptr_nonnull(f);
    config_init_defaults(c);
    int n = config_load_string(c, yaml, "t.yaml", f);
    fclose(f);
    return n;
}

/* One error, printed exactly as expected (plus the newline). */
static inline void expect_error(const char *yaml, const char *expected)
{
    pagid_config c;
    int n = load(&c, yaml);
    char want[1024];
    snprintf(want, sizeof want, "%s\n", expected);
    ck_assert_str_eq(out_text, want);
    ck_assert_int_eq(n, 1);
    config_free(&c);
}

static inline void expect_ok(const char *yaml)
{
    pagid_config c;
    int n = load(&c, yaml);
    ck_assert_str_eq(out_text, "");
    ck_assert_int_eq(n, 0);
    config_free(&c);
}

static inline void teardown(void)
{
    free(out_text);
    out_text = NULL;
}

#endif

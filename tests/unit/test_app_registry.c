/*
 * test_app_registry.c - Check suite for src/worker/app_registry.c: built-in
 * names (with and without ":arg"), unknown names, and .so modules compiled
 * at test time: a good one, a missing file, no symbol, no handle, and the ABI
 * policy: an older minor loads; a newer minor, ABI 1 and another major do not.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/app_registry.h"

#ifndef TOP_SRCDIR
#error "TOP_SRCDIR must be defined (see tests/unit/worker_engine.mk)"
#endif

static char dir[64];
static char path_good[128], path_badabi[128], path_nosym[128], path_nohandle[128];
static char path_abi1[128], path_major3[128], path_minor0[128], path_newfn[128];

static const char src_good[] =
    "#include <pagi/pagi.h>\n"
    "static void h(pagi_scope *s, void *i) { pagi_scope_finish(s, 0); }\n"
    "const pagi_app pagi_module = {PAGI_ABI_VERSION, \"good\", 0, h, 0};\n";
static const char src_badabi[] =
    "#include <pagi/pagi.h>\n"
    "static void h(pagi_scope *s, void *i) { (void)s; (void)i; }\n"
    "const pagi_app pagi_module = {PAGI_ABI_VERSION + 98, \"old\", 0, h, 0};\n";
static const char src_abi1[] = /* what an ABI-1 module stored */
    "#include <pagi/pagi.h>\n"
    "static void h(pagi_scope *s, void *i) { (void)s; (void)i; }\n"
    "const pagi_app pagi_module = {1, \"abi1\", 0, h, 0};\n";
static const char src_major3[] =
    "#include <pagi/pagi.h>\n"
    "static void h(pagi_scope *s, void *i) { (void)s; (void)i; }\n"
    "const pagi_app pagi_module = {PAGI_ABI(3, 0), \"m3\", 0, h, 0};\n";
static const char src_minor0[] =
    "#include <pagi/pagi.h>\n"
    "static void h(pagi_scope *s, void *i) { pagi_scope_finish(s, 0); (void)i; }\n"
    "const pagi_app pagi_module = {PAGI_ABI(PAGI_ABI_MAJOR, 0), \"m0\", 0, h, 0};\n";
/* A newer minor's module calls a function this server lacks: dlopen fails,
 * and the error must still name the versions, not only the symbol. */
static const char src_newfn[] =
    "#include <pagi/pagi.h>\n"
    "void pagi_from_the_future(pagi_scope *s);\n"
    "static void h(pagi_scope *s, void *i) { pagi_from_the_future(s); (void)i; }\n"
    "const pagi_app pagi_module = {PAGI_ABI(PAGI_ABI_MAJOR, 99), \"nf\", 0, h, 0};\n";
static const char src_nosym[] =
    "#include <pagi/pagi.h>\n"
    "const pagi_app not_the_module = {PAGI_ABI_VERSION, \"x\", 0, 0, 0};\n";
static const char src_nohandle[] =
    "#include <pagi/pagi.h>\n"
    "const pagi_app pagi_module = {PAGI_ABI_VERSION, \"nh\", 0, 0, 0};\n";

/* Write src to DIR/name.c and build DIR/name.so against the public header. */
static void build_module(const char *name, const char *src, char *out, size_t outlen)
{
    char c_path[128], cmd[1024];
    snprintf(c_path, sizeof c_path, "%s/%s.c", dir, name);
    snprintf(out, outlen, "%s/%s.so", dir, name);
    FILE *f = fopen(c_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(src, f);
    fclose(f);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd, "%s -shared -fPIC -I'%s/include' -o '%s' '%s'", cc && *cc ? cc : "cc",
             TOP_SRCDIR, out, c_path);
    ck_assert_msg(system(cmd) == 0, "could not build the test module: %s", cmd);
}

static void build_modules(void)
{
    strcpy(dir, "/tmp/pagid-appreg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    build_module("good", src_good, path_good, sizeof path_good);
    build_module("badabi", src_badabi, path_badabi, sizeof path_badabi);
    build_module("nosym", src_nosym, path_nosym, sizeof path_nosym);
    build_module("nohandle", src_nohandle, path_nohandle, sizeof path_nohandle);
    build_module("abi1", src_abi1, path_abi1, sizeof path_abi1);
    build_module("major3", src_major3, path_major3, sizeof path_major3);
    build_module("minor0", src_minor0, path_minor0, sizeof path_minor0);
    build_module("newfn", src_newfn, path_newfn, sizeof path_newfn);
}

static void remove_modules(void)
{
    static const char *const names[] = {"good",   "badabi", "nosym",  "nohandle",
                                        "abi1",   "major3", "minor0", "newfn"};
    char p[160];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s.c", dir, names[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s/%s.so", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* ---- built-ins ---- */

static void expect_builtin(const char *spec, const char *name, const char *arg)
{
    app_handle h;
    char err[256] = "";
    ck_assert_msg(app_registry_load(spec, &h, err, sizeof err) == 0, "%s: %s", spec, err);
    ck_assert_ptr_nonnull(h.app);
    ck_assert_int_eq(h.app->abi_version, PAGI_ABI_VERSION);
    ck_assert_ptr_nonnull(h.app->handle);
    if (name)
        ck_assert_str_eq(h.app->name, name);
    ck_assert_ptr_null(h.dl);
    if (arg)
        ck_assert_str_eq(h.arg, arg);
    else
        ck_assert_ptr_null(h.arg);
    app_registry_unload(&h);
    ck_assert_ptr_null(h.app);
    ck_assert_ptr_null(h.arg);
}

START_TEST(builtins_resolve)
{
    expect_builtin("hello", "hello", NULL);
    expect_builtin("echo", "echo", NULL);
    expect_builtin("demo", "demo", NULL);
}
END_TEST

START_TEST(builtin_with_arg)
{
    expect_builtin("hello:some arg", "hello", "some arg");
    expect_builtin("echo:", "echo", "");
}
END_TEST

/*
 * The argument of a built-in may hold a '/' (static:DIR is the documented
 * form): the name before ':' decides, not the presence of a slash.
 */
START_TEST(builtin_arg_with_slash)
{
    expect_builtin("echo:/srv/www", "echo", "/srv/www");
}
END_TEST

static void expect_error(const char *spec, const char *needle)
{
    app_handle h;
    char err[512] = "";
    ck_assert_int_eq(app_registry_load(spec, &h, err, sizeof err), -1);
    ck_assert_ptr_null(h.app);
    ck_assert_ptr_null(h.dl);
    ck_assert_msg(strstr(err, needle) != NULL, "'%s' not in the message for %s: %s", needle, spec,
                  err);
}

START_TEST(unknown_names)
{
    expect_error("nope", "unknown app 'nope'");
    expect_error("hell", "unknown app");
    expect_error("hellox", "unknown app");
    expect_error("HELLO", "unknown app");
    expect_error("", "unknown app");
    expect_error(":x", "unknown app");
}
END_TEST

START_TEST(short_error_buffer)
{
    app_handle h;
    char err[12];
    memset(err, 'Z', sizeof err);
    ck_assert_int_eq(app_registry_load("a-very-long-unknown-app-name", &h, err, 8), -1);
    ck_assert_uint_eq(strlen(err), 7);
    ck_assert_int_eq(err[8], 'Z'); /* nothing written past errlen */
}
END_TEST

/* ---- modules ---- */

START_TEST(module_loads)
{
    app_handle h;
    char err[512] = "";
    ck_assert_msg(app_registry_load(path_good, &h, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(h.app);
    ck_assert_ptr_nonnull(h.dl);
    ck_assert_str_eq(h.app->name, "good");
    ck_assert_int_eq(h.app->abi_version, PAGI_ABI_VERSION);
    ck_assert_ptr_nonnull(h.app->handle);
    ck_assert_ptr_null(h.arg);
    app_registry_unload(&h);
    ck_assert_ptr_null(h.app);
}
END_TEST

START_TEST(module_missing_file)
{
    char spec[200];
    snprintf(spec, sizeof spec, "%s/does-not-exist.so", dir);
    app_handle h;
    char err[512] = "";
    ck_assert_int_eq(app_registry_load(spec, &h, err, sizeof err), -1);
    ck_assert_ptr_null(h.app);
    ck_assert_ptr_nonnull(strstr(err, spec));
    /* dlopen's own words are passed on. */
    ck_assert_msg(strstr(err, "No such file or directory") != NULL, "%s", err);
    expect_error("/nonexistent/app.so", "cannot load app module /nonexistent/app.so");
}
END_TEST

START_TEST(module_not_a_library)
{
    char spec[200];
    snprintf(spec, sizeof spec, "%s/good.c", dir); /* a path, but not an ELF object */
    expect_error(spec, "cannot load app module");
}
END_TEST

START_TEST(module_wrong_abi)
{
    /* PAGI_ABI_VERSION + 98: this major, minor 99, newer than the server's. */
    char want[600];
    snprintf(want, sizeof want, "needs pagi ABI %d.%d, this server speaks %d.%d", PAGI_ABI_MAJOR,
             PAGI_ABI_MINOR + 98, PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    expect_error(path_badabi, want);
    snprintf(want, sizeof want, "built against pagi ABI 1.x, this server speaks %d.%d: rebuild "
             "against the installed pagi.h", PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    expect_error(path_abi1, want);
    snprintf(want, sizeof want, "built against pagi ABI 3.0, this server speaks %d.%d",
             PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    expect_error(path_major3, want);
    snprintf(want, sizeof want, "app module %s needs pagi ABI %d.99, this server speaks %d.%d",
             path_newfn, PAGI_ABI_MAJOR, PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    expect_error(path_newfn, want);
}
END_TEST

START_TEST(module_older_minor_loads)
{
    app_handle h;
    char err[256] = "";
    ck_assert_msg(app_registry_load(path_minor0, &h, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(h.app->abi_version, PAGI_ABI(PAGI_ABI_MAJOR, 0));
    ck_assert_str_eq(h.app->name, "m0");
    app_registry_unload(&h);
}
END_TEST

START_TEST(runtime_version_calls)
{
    ck_assert_uint_eq(pagi_abi_version(), PAGI_ABI_VERSION);
    ck_assert_uint_eq(PAGI_ABI_MAJOR_OF(pagi_abi_version()), PAGI_ABI_MAJOR);
    ck_assert_uint_eq(PAGI_ABI_MINOR_OF(pagi_abi_version()), PAGI_ABI_MINOR);
    ck_assert_int_eq(strncmp(pagi_server_version(), "pagid ", 6), 0);
}
END_TEST

START_TEST(module_without_symbol)
{
    expect_error(path_nosym, "does not export 'pagi_module'");
}
END_TEST

START_TEST(module_without_handle)
{
    expect_error(path_nohandle, "no handle function");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("app_registry");
    TCase *t = tcase_create("builtin");
    tcase_add_test(t, builtins_resolve);
    tcase_add_test(t, builtin_with_arg);
    tcase_add_test(t, builtin_arg_with_slash);
    tcase_add_test(t, unknown_names);
    tcase_add_test(t, short_error_buffer);
    suite_add_tcase(s, t);

    t = tcase_create("module");
    /* Built once, in the runner process, before the forked tests. */
    tcase_add_unchecked_fixture(t, build_modules, remove_modules);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, module_loads);
    tcase_add_test(t, module_missing_file);
    tcase_add_test(t, module_not_a_library);
    tcase_add_test(t, module_wrong_abi);
    tcase_add_test(t, module_older_minor_loads);
    tcase_add_test(t, runtime_version_calls);
    tcase_add_test(t, module_without_symbol);
    tcase_add_test(t, module_without_handle);
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

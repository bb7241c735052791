/*
 * test_static_cache.c - Check suite for src/worker/apps/static_cache.c:
 * when an entry is trusted, small files held in memory and large ones by
 * fd, the bounds on entries and bytes (least recently used out first), and
 * every fd closed when its entry goes.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/apps/static_cache.h"

static char dir[] = "/tmp/pagid-static-cache-XXXXXX";

/* A file of size bytes of c, opened read-only, with its facts in f. */
static int make_file(const char *name, size_t size, char c, static_file *f)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *w = fopen(path, "w");
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < size; i++)
        fputc(c, w);
    fclose(w);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    memset(f, 0, sizeof *f);
    f->fd = fd;
    f->size = st.st_size;
    f->ino = st.st_ino;
    f->dev = st.st_dev;
    f->type = "text/plain";
    return fd;
}

static int fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    strcpy(dir, "/tmp/pagid-static-cache-XXXXXX");
}

START_TEST(no_entries_no_cache)
{
    ck_assert_ptr_null(static_cache_new(0, 1 << 20, 0));
    static_cache_free(NULL);
}
END_TEST

START_TEST(small_files_are_held_in_memory)
{
    static_cache *c = static_cache_new(8, 1 << 20, 0);
    static_file f;
    int fd = make_file("a.txt", 15, 'a', &f);
    const static_file *e = static_cache_put(c, "a.txt", 5, &f, 10.0);
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(e->body);
    ck_assert_int_eq(e->fd, -1);
    ck_assert(!fd_open(fd)); /* read, then closed */
    ck_assert_uint_eq(static_cache_bytes(c), 15);
    ck_assert_mem_eq(pagi_buf_data(e->body), "aaaaaaaaaaaaaaa", 15);
    static_cache_free(c);
}
END_TEST

START_TEST(large_files_keep_their_fd_only_when_trusted_a_while)
{
    static_cache *c = static_cache_new(8, 1 << 20, 0);
    static_file f;
    size_t big = static_cache_inline_max(c) + 1;
    int fd = make_file("big", big, 'b', &f);
    ck_assert_ptr_null(static_cache_put(c, "big", 3, &f, 10.0));
    ck_assert(fd_open(fd)); /* still the caller's */
    ck_assert_uint_eq(static_cache_entries(c), 0);
    close(fd);
    static_cache_free(c);

    c = static_cache_new(8, 1 << 20, 1.0);
    fd = make_file("big", big, 'b', &f);
    const static_file *e = static_cache_put(c, "big", 3, &f, 10.0);
    ck_assert_ptr_null(e->body);
    ck_assert_int_eq(e->fd, fd);
    ck_assert_uint_eq(static_cache_bytes(c), 0);
    static_cache_free(c);
    ck_assert(!fd_open(fd)); /* closed with its entry */
}
END_TEST

START_TEST(trusted_for_the_iteration_or_valid)
{
    static_cache *c = static_cache_new(8, 1 << 20, 0);
    static_file f;
    make_file("a", 3, 'x', &f);
    static_cache_put(c, "a", 1, &f, 10.0);
    ck_assert_ptr_nonnull(static_cache_get(c, "a", 1, 10.0)); /* the same loop iteration */
    ck_assert_ptr_null(static_cache_get(c, "a", 1, 10.000001));
    ck_assert_ptr_nonnull(static_cache_peek(c, "a", 1)); /* stale, still there */
    static_cache_touch(c, "a", 1, 11.0);
    ck_assert_ptr_nonnull(static_cache_get(c, "a", 1, 11.0));
    ck_assert_ptr_null(static_cache_get(c, "b", 1, 11.0));
    static_cache_free(c);

    c = static_cache_new(8, 1 << 20, 2.0);
    make_file("a", 3, 'x', &f);
    static_cache_put(c, "a", 1, &f, 10.0);
    ck_assert_ptr_nonnull(static_cache_get(c, "a", 1, 11.9));
    ck_assert_ptr_null(static_cache_get(c, "a", 1, 12.0));
    static_cache_free(c);
}
END_TEST

START_TEST(entries_are_bounded_lru)
{
    static_cache *c = static_cache_new(3, 1 << 20, 100);
    static_file f;
    int fds[4];
    const char *names[] = {"k0", "k1", "k2", "k3"};
    size_t big = static_cache_inline_max(c) + 1;
    for (int i = 0; i < 3; i++) {
        fds[i] = make_file(names[i], big, 'z', &f);
        static_cache_put(c, names[i], 2, &f, 1.0);
    }
    ck_assert_ptr_nonnull(static_cache_get(c, "k0", 2, 1.0)); /* k0 is now the newest */
    fds[3] = make_file(names[3], big, 'z', &f);
    static_cache_put(c, "k3", 2, &f, 1.0);
    ck_assert_uint_eq(static_cache_entries(c), 3);
    ck_assert_ptr_null(static_cache_peek(c, "k1", 2)); /* the least recently used went */
    ck_assert(!fd_open(fds[1]));
    ck_assert(fd_open(fds[0]) && fd_open(fds[2]) && fd_open(fds[3]));
    static_cache_drop(c, "k0", 2);
    ck_assert(!fd_open(fds[0]));
    ck_assert_uint_eq(static_cache_entries(c), 2);
    static_cache_free(c);
    ck_assert(!fd_open(fds[2]) && !fd_open(fds[3]));
}
END_TEST

START_TEST(bytes_are_bounded)
{
    /* 4096 bytes in all: files up to a quarter (1024) are held, four at most. */
    static_cache *c = static_cache_new(100, 4096, 100);
    ck_assert_uint_eq(static_cache_inline_max(c), 1024);
    static_file f;
    char name[8];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "f%d", i);
        make_file(name, 1000, 'q', &f);
        const static_file *e = static_cache_put(c, name, strlen(name), &f, 1.0);
        ck_assert_ptr_nonnull(e->body);
        ck_assert_uint_le(static_cache_bytes(c), 4096);
    }
    ck_assert_uint_eq(static_cache_bytes(c), 4000);
    ck_assert_ptr_null(static_cache_peek(c, "f0", 2));
    ck_assert_ptr_nonnull(static_cache_peek(c, "f5", 2));
    static_cache_free(c);
}
END_TEST

START_TEST(a_put_replaces_and_a_sent_body_outlives_its_entry)
{
    static_cache *c = static_cache_new(4, 1 << 20, 100);
    static_file f;
    make_file("a", 5, '1', &f);
    const static_file *e = static_cache_put(c, "a", 1, &f, 1.0);
    pagi_buf *held = pagi_buf_ref(e->body); /* as a response in flight does */
    make_file("a", 6, '2', &f);
    e = static_cache_put(c, "a", 1, &f, 2.0);
    ck_assert_int_eq(e->size, 6);
    ck_assert_uint_eq(static_cache_entries(c), 1);
    ck_assert_uint_eq(static_cache_bytes(c), 6);
    ck_assert_mem_eq(pagi_buf_data(held), "11111", 5);
    pagi_buf_unref(held);
    static_cache_free(c);
}
END_TEST

static Suite *static_cache_suite(void)
{
    Suite *s = suite_create("static_cache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, no_entries_no_cache);
    tcase_add_test(tc, small_files_are_held_in_memory);
    tcase_add_test(tc, large_files_keep_their_fd_only_when_trusted_a_while);
    tcase_add_test(tc, trusted_for_the_iteration_or_valid);
    tcase_add_test(tc, entries_are_bounded_lru);
    tcase_add_test(tc, bytes_are_bounded);
    tcase_add_test(tc, a_put_replaces_and_a_sent_body_outlives_its_entry);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(static_cache_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * config_yaml_include.c - the YAML loader's `include:` key: a path or glob,
 * or a list of them, relative to the including file's directory, like
 * nginx's include of a conf.d directory. Each file is a mapping of top-level keys walked
 * in place into the same config, so its errors carry its own FILE:LINE:COLUMN
 * and keys merge by the rules of note_key (config_yaml.c). Depth, cycles, a
 * file included twice and runaway globs are caught here.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_yaml_int.h"

int read_config_fd(int fd, size_t size_hint, buf *out, const char **problem)
{
    /* The whole file and one byte for the end in one buffer, when its size
     * is known: growing it 64 KiB at a time copied a large config over and
     * over. A file that grows meanwhile, or a pipe, is read on in chunks. */
    size_t room = size_hint > 0 && size_hint <= MAX_FILE_SIZE ? size_hint + 1 : 64 * 1024;
    for (;;) {
        if (room == 0)
            room = 64 * 1024;
        char *w = buf_reserve(out, room);
        if (!w) {
            *problem = "out of memory";
            return -1;
        }
        ssize_t got = read(fd, w, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *problem = strerror(errno);
            return -1;
        }
        buf_commit(out, (size_t)got);
        room -= (size_t)got;
        if (buf_size(out) > MAX_FILE_SIZE) {
            *problem = "too large for a config file (over 16 MiB)";
            return -1;
        }
        if (got == 0)
            return 0;
    }
}

/*
 * value resolved against the directory of the including file `base`; for a
 * glob, that directory's own *, ? and [ are escaped so only value's are
 * patterns. Allocated; NULL when out of memory.
 */
static char *resolve(const char *base, const char *value, int is_glob)
{
    const char *slash = strrchr(base, '/');
    size_t dlen = value[0] == '/' || !slash ? 0 : (size_t)(slash - base) + 1;
    char *out = malloc(2 * dlen + strlen(value) + 1);
    if (!out)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < dlen; i++) {
        if (is_glob && strchr("*?[\\", base[i]))
            out[j++] = '\\';
        out[j++] = base[i];
    }
    strcpy(out + j, value);
    return out;
}

/* "a.yaml -> b.yaml -> a.yaml": the chain of includes from `again` down to
 * the including file, then `again` by the path this include names. */
static void report_cycle(load_ctx *x, const ynode *n, int again, const char *path)
{
    load_state *st = x->st;
    buf chain = BUF_INIT;
    int rc = buf_printf(&chain, "%s", st->files[x->file].name);
    for (int i = (int)x->file; i != again && st->files[i].parent >= 0;) {
        i = st->files[i].parent;
        /* Prepend: the chain is walked upwards. */
        buf up = BUF_INIT;
        rc |= buf_printf(&up, "%s -> ", st->files[i].name);
        rc |= buf_append(&up, buf_head(&chain), buf_size(&chain));
        buf_free(&chain);
        chain = up;
    }
    rc |= buf_printf(&chain, " -> %s", path);
    rc |= buf_append(&chain, "", 1);
    if (rc)
        report(x, n, "include cycle (out of memory to show it)");
    else
        report(x, n, "include cycle: %s", buf_head(&chain));
    buf_free(&chain);
}

/* A file already in this load (same device and inode): its index, or -1. */
static int find_loaded(const load_state *st, const struct stat *sb)
{
    for (size_t i = 0; i < st->n_files; i++) {
        const load_file *f = &st->files[i];
        if (f->has_id && f->dev == sb->st_dev && f->ino == sb->st_ino)
            return (int)i;
    }
    return -1;
}

/*
 * Open an included file: a regular file only, checked before it is opened
 * (opening a device may act: /dev/watchdog arms a reboot) and again on the
 * descriptor; non-blocking, so /proc/kmsg cannot hang "pagid -t"; its size
 * checked before anything is read. The fd, or -1 with *problem.
 */
static int open_included(const char *path, struct stat *sb, const char **problem)
{
    if (stat(path, sb) < 0) {
        *problem = strerror(errno);
        return -1;
    }
    if (!S_ISREG(sb->st_mode)) {
        *problem = S_ISDIR(sb->st_mode) ? strerror(EISDIR) : "not a regular file";
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        *problem = strerror(errno);
        return -1;
    }
    if (fstat(fd, sb) < 0)
        *problem = strerror(errno);
    else if (!S_ISREG(sb->st_mode)) /* replaced since the stat */
        *problem = "not a regular file";
    else if (sb->st_size > MAX_FILE_SIZE)
        *problem = "too large for a config file (over 16 MiB)";
    else
        return fd;
    close(fd);
    return -1;
}

/* Load one file named by the include at node n (errors about it point at n). */
static void include_file(load_ctx *x, const ynode *n, const char *path)
{
    load_state *st = x->st;
    char shown[512], where[POS_TEXT_MAX];
    const char *problem = NULL;
    struct stat sb;
    printable_text(path, strlen(path), shown, sizeof shown);
    int fd = open_included(path, &sb, &problem);
    if (fd < 0) {
        report(x, n, "cannot include '%s': %s", shown, problem);
        return;
    }
    if (x->depth >= MAX_INCLUDE_DEPTH) {
        report(x, n, "cannot include '%s': includes nested more than %d levels deep", shown,
               MAX_INCLUDE_DEPTH);
        close(fd);
        return;
    }
    int seen = find_loaded(st, &sb);
    if (seen >= 0) {
        if (st->files[seen].open)
            report_cycle(x, n, seen, path);
        else
            report(x, n, "'%s' is already included (at %s)", shown,
                   pos_text(st, st->files[seen].included_at, where, sizeof where));
        close(fd);
        return;
    }
    if (st->n_files > MAX_INCLUDED_FILES) {
        report(x, n, "cannot include '%s': more than %d files included", shown, MAX_INCLUDED_FILES);
        close(fd);
        return;
    }
    buf text = BUF_INIT;
    int rc = read_config_fd(fd, (size_t)sb.st_size, &text, &problem);
    close(fd);
    if (rc < 0) {
        report(x, n, "cannot include '%s': %s", shown, problem);
        buf_free(&text);
        return;
    }
    int idx = load_add_file(st, path, (int)x->file, node_pos(x, n));
    if (idx < 0) {
        report(x, n, "out of memory");
        buf_free(&text);
        return;
    }
    /* By index: nested includes may move st->files. */
    st->files[idx].has_id = 1;
    st->files[idx].dev = sb.st_dev;
    st->files[idx].ino = sb.st_ino;
    st->files[idx].open = 1;
    load_text(st, (unsigned)idx, x->depth + 1, text.data ? buf_head(&text) : "", buf_size(&text));
    st->files[idx].open = 0;
    buf_free(&text);
}

/* glob()'s error callback has no context argument: the first directory it
 * could not read (not one that does not exist: a glob may match nothing). */
static char glob_failed_dir[4096];
static int glob_failed_errno;

static int note_glob_error(const char *epath, int eerrno)
{
    if (eerrno != ENOENT && eerrno != ENOTDIR && !glob_failed_dir[0]) {
        snprintf(glob_failed_dir, sizeof glob_failed_dir, "%s", epath);
        glob_failed_errno = eerrno;
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One entry: a plain path must exist; a glob may match nothing (as in nginx). */
static void include_one(load_ctx *x, const ynode *n)
{
    char shown[512];
    const char *value = scalar(x, n, "include");
    if (!value)
        return;
    if (!*value) {
        report(x, n, "'include' needs a path");
        return;
    }
    int is_glob = strpbrk(value, "*?[") != NULL;
    char *path = resolve(x->st->files[x->file].name, value, is_glob);
    if (!path) {
        report(x, n, "out of memory");
        return;
    }
    if (!is_glob) {
        include_file(x, n, path);
        free(path);
        return;
    }
    glob_t g;
    glob_failed_dir[0] = '\0';
    int rc = glob(path, GLOB_NOSORT, note_glob_error, &g);
    printable_text(path, strlen(path), shown, sizeof shown);
    if (glob_failed_dir[0]) {
        /* A directory that cannot be read would drop its drop-ins silently. */
        char dir[POS_TEXT_MAX];
        printable_text(glob_failed_dir, strlen(glob_failed_dir), dir, sizeof dir);
        report(x, n, "cannot expand '%s': %s: %s", shown, dir, strerror(glob_failed_errno));
    } else if (rc == GLOB_NOSPACE) {
        report(x, n, "out of memory");
    } else if (rc != 0 && rc != GLOB_NOMATCH) {
        report(x, n, "cannot expand '%s'", shown);
    } else if (rc == 0 && g.gl_pathc > MAX_INCLUDED_FILES) {
        report(x, n, "'%s' matches more than %d files", shown, MAX_INCLUDED_FILES);
    } else if (rc == 0) {
        /* Byte order, whatever the locale: 10-x.yaml before 20-y.yaml, always. */
        qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, by_name);
        for (size_t i = 0; i < g.gl_pathc; i++)
            include_file(x, n, g.gl_pathv[i]);
    }
    globfree(&g);
    free(path);
}

void set_include(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    if (is_null(n))
        return;
    if (n->type == YAML_MAPPING_NODE) {
        report(x, n, "'%s' must be a path or a list of paths, not %s", path, kind_name(n));
        return;
    }
    if (n->type != YAML_SEQUENCE_NODE) {
        include_one(x, n);
        return;
    }
    for (size_t i = 0; i < n->len; i++)
        include_one(x, item_at(x, n, i));
}

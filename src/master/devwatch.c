/*
 * devwatch.c - --dev's reload on change: inotify watches on the app files,
 * the -I and lib/ trees and the directories of the modules the workers
 * report having loaded; a change is debounced, then the master reloads as
 * for SIGHUP (a broken edit leaves the serving generation alone).
 */
#include "devwatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path.h"

#define DEV_DEBOUNCE_S 0.2
#define DEV_MAX_DIRS 512 /* a lib tree deeper than this is watched in part */
#define DEV_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM)

struct devwatch {
    int ino;       /* inotify */
    int report_rd; /* the workers' reports: loaded files, one per line */
    int report_wr; /* their end, inherited (PAGID_DEV_REPORT_FD) */
    char **dirs;   /* watched directory of each watch descriptor, by wd */
    int n_dirs;    /* distinct directories watched */
    int cap_wd;
    char **files; /* names watched whatever their extension (app files) */
    size_t n_files;
    double due; /* when to reload; INFINITY: nothing changed */
    char changed[PATH_MAX];
    char partial[PATH_MAX]; /* a report line cut by the pipe's read */
    size_t partial_len;
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Watch dir (once). 0, or -1 when it cannot be watched. */
static int watch_dir(devwatch *d, const char *dir)
{
    if (d->n_dirs >= DEV_MAX_DIRS)
        return -1;
    int wd = inotify_add_watch(d->ino, dir, DEV_MASK | IN_ONLYDIR);
    if (wd < 0)
        return -1;
    if (wd < d->cap_wd && d->dirs[wd])
        return 0; /* already watched */
    if (wd >= d->cap_wd) {
        int cap = wd + 64;
        char **v = realloc(d->dirs, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        memset(v + d->cap_wd, 0, (size_t)(cap - d->cap_wd) * sizeof *v);
        d->dirs = v;
        d->cap_wd = cap;
    }
    if (!(d->dirs[wd] = strdup(dir)))
        return -1;
    d->n_dirs++;
    return 0;
}

/* A lib tree: the directory and those under it, breadth bounded. */
static void watch_tree(devwatch *d, const char *dir, int depth)
{
    if (watch_dir(d, dir) < 0 || depth > 8)
        return;
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    struct dirent *e;
    while ((e = readdir(dh))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[PATH_MAX];
        struct stat st;
        if (snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= (int)sizeof sub ||
            stat(sub, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        watch_tree(d, sub, depth + 1);
    }
    closedir(dh);
}

/* An app file: its directory, and its name whatever the extension. */
static void watch_file(devwatch *d, const char *file)
{
    char abs[PATH_MAX], dir[PATH_MAX];
    if (!realpath(file, abs))
        return;
    path_dir_of(abs, dir, sizeof dir);
    if (watch_dir(d, dir) < 0)
        return;
    const char *base = strrchr(abs, '/') ? strrchr(abs, '/') + 1 : abs;
    for (size_t i = 0; i < d->n_files; i++)
        if (strcmp(d->files[i], base) == 0)
            return;
    char **v = realloc(d->files, (d->n_files + 1) * sizeof *v);
    if (!v)
        return;
    d->files = v;
    if ((v[d->n_files] = strdup(base)))
        d->n_files++;
}

/* The app file of spec (a Perl app: by its extension), with its lib/. */
static void watch_app(devwatch *d, const char *spec)
{
    if (!spec || !config_perl_app_kind(spec))
        return;
    watch_file(d, spec);
    char abs[PATH_MAX], lib[PATH_MAX + 8];
    if (!realpath(spec, abs))
        return;
    path_dir_of(abs, lib, PATH_MAX);
    strcat(lib, "/lib");
    struct stat st;
    if (stat(lib, &st) == 0 && S_ISDIR(st.st_mode))
        watch_tree(d, lib, 0);
}

devwatch *devwatch_new(const pagid_config *cfg, const cli_options *o)
{
    devwatch *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->due = INFINITY;
    d->report_rd = d->report_wr = -1;
    d->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (d->ino < 0) {
        log_warn("--dev: inotify: %s; no reload on change", strerror(errno));
        free(d);
        return NULL;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
        /* The workers' end stays open across their fork, blocking (a line
         * is short; the master reads at once). */
        d->report_rd = p[0];
        d->report_wr = p[1];
        int fl = fcntl(p[1], F_GETFD);
        fcntl(p[1], F_SETFD, fl & ~FD_CLOEXEC);
        fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) & ~O_NONBLOCK);
        char num[16];
        snprintf(num, sizeof num, "%d", p[1]);
        setenv("PAGID_DEV_REPORT_FD", num, 1);
    }
    watch_app(d, cfg->app);
    for (size_t i = 0; i < cfg->n_mounts; i++)
        watch_app(d, cfg->mounts[i].app);
    for (size_t i = 0; i < o->n_perl_libs; i++)
        watch_tree(d, o->perl_libs[i], 0);
    if (cfg->perl_lib) {
        char *libs = strdup(cfg->perl_lib);
        for (char *save = NULL, *t = libs ? strtok_r(libs, ":", &save) : NULL; t;
             t = strtok_r(NULL, ":", &save))
            watch_tree(d, t, 0);
        free(libs);
    }
    if (o->config_file)
        watch_file(d, o->config_file);
    log_info("--dev: watching %d director%s for changes to the app and its modules", d->n_dirs,
             d->n_dirs == 1 ? "y" : "ies");
    return d;
}

void devwatch_free(devwatch *d)
{
    if (!d)
        return;
    close(d->ino);
    if (d->report_rd >= 0)
        close(d->report_rd);
    if (d->report_wr >= 0)
        close(d->report_wr);
    for (int i = 0; i < d->cap_wd; i++)
        free(d->dirs[i]);
    free(d->dirs);
    for (size_t i = 0; i < d->n_files; i++)
        free(d->files[i]);
    free(d->files);
    free(d);
}

int devwatch_pollfds(const devwatch *d, struct pollfd *out)
{
    if (!d)
        return 0;
    int n = 0;
    out[n++] = (struct pollfd){.fd = d->ino, .events = POLLIN};
    if (d->report_rd >= 0)
        out[n++] = (struct pollfd){.fd = d->report_rd, .events = POLLIN};
    return n;
}

/* Does a change to name in a watched directory matter? */
static int interesting(const devwatch *d, const char *name)
{
    if (ends_with(name, ".pm") || ends_with(name, ".pl") || ends_with(name, ".psgi"))
        return 1;
    for (size_t i = 0; i < d->n_files; i++)
        if (strcmp(d->files[i], name) == 0)
            return 1;
    return 0;
}

/* A file a worker loaded: watch its directory (a module's name ends in .pm). */
static void take_report_line(devwatch *d, const char *line)
{
    if (line[0] != '/')
        return;
    char dir[PATH_MAX];
    path_dir_of(line, dir, sizeof dir);
    watch_dir(d, dir);
}

static void read_reports(devwatch *d)
{
    char chunk[4096];
    ssize_t n;
    while ((n = read(d->report_rd, chunk, sizeof chunk)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] != '\n') {
                if (d->partial_len < sizeof d->partial - 1)
                    d->partial[d->partial_len++] = chunk[i];
                continue;
            }
            d->partial[d->partial_len] = '\0';
            take_report_line(d, d->partial);
            d->partial_len = 0;
        }
    }
}

void devwatch_io(devwatch *d, double now)
{
    if (!d)
        return;
    if (d->report_rd >= 0)
        read_reports(d);
    char evbuf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(d->ino, evbuf, sizeof evbuf)) > 0) {
        for (char *p = evbuf; p < evbuf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->len == 0 || ev->wd < 0 || ev->wd >= d->cap_wd || !d->dirs[ev->wd])
                continue;
            if ((ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
                char sub[PATH_MAX];
                if (snprintf(sub, sizeof sub, "%s/%s", d->dirs[ev->wd], ev->name) < (int)sizeof sub)
                    watch_tree(d, sub, 0);
                continue;
            }
            if (!interesting(d, ev->name))
                continue;
            snprintf(d->changed, sizeof d->changed, "%s/%s", d->dirs[ev->wd], ev->name);
            /* Debounced: an editor's save is several events, a checkout many. */
            d->due = now + DEV_DEBOUNCE_S;
        }
    }
}

double devwatch_deadline(const devwatch *d)
{
    return d ? d->due : INFINITY;
}

const char *devwatch_due(devwatch *d, double now)
{
    if (!d || now < d->due)
        return NULL;
    d->due = INFINITY;
    return d->changed;
}

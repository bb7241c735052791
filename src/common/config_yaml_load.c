/*
 * config_yaml_load.c - reads config files and hands them to libyaml (through
 * config_yaml_doc.c) for the walk in config_yaml.c: the entry points
 * config_load_file and config_load_string, syntax errors with their
 * FILE:LINE:COLUMN, and the state one load shares with the files it includes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config_yaml_int.h"

/* libyaml's reader errors carry a byte offset, not a mark: count lines ourselves. */
static void offset_to_mark(const char *text, size_t len, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

void report_syntax(load_ctx *x, yaml_parser_t *p, const char *text, size_t len)
{
    size_t line, col;
    if (p->error == YAML_READER_ERROR) {
        offset_to_mark(text, len, p->problem_offset, &line, &col);
    } else {
        line = p->problem_mark.line + 1;
        col = p->problem_mark.column + 1;
    }
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_MEMORY_ERROR)
        problem = "out of memory";
    if (p->context)
        report_at(x, line, col, "%s (%s)", problem, p->context);
    else
        report_at(x, line, col, "%s", problem);
}

void load_text(load_state *st, unsigned file, unsigned depth, const char *text, size_t len)
{
    load_ctx x = {.c = st->c, .err = st->err, .st = st, .file = file, .depth = depth};
    yaml_parser_t parser;
    ydoc doc;

    if (!yaml_parser_initialize(&parser)) {
        report_at(&x, 1, 1, "out of memory");
        return;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (build_document(&x, &parser, &doc, text, len) != 1) {
        /* An empty file (or only comments) is a valid, all-defaults config. */
        yaml_parser_delete(&parser);
        return;
    }
    x.doc = &doc;
    const ynode *root = ydoc_root(&doc);
    if (root && is_null(root)) {
        /* A document of nothing ("---" alone) is the same. */
    } else if (root && root->type != YAML_MAPPING_NODE) {
        report(&x, root, "the top level must be a mapping of keys, not %s", kind_name(root));
    } else if (root) {
        walk_top(&x, root);
    }

    /* A second document is almost certainly a stray "---"; say so. */
    if (root) {
        ydoc next;
        if (build_document(&x, &parser, &next, text, len) == 1) {
            const ynode *r2 = ydoc_root(&next);
            if (r2)
                report(&x, r2, "more than one YAML document; a config file holds one");
            ydoc_free(&next);
        }
    }
    app_memo_free(&x);
    ydoc_free(&doc);
    yaml_parser_delete(&parser);
}

int load_add_file(load_state *st, const char *name, int parent, src_pos included_at)
{
    load_file *grown = realloc(st->files, (st->n_files + 1) * sizeof *grown);
    if (!grown)
        return -1;
    st->files = grown;
    load_file *f = &st->files[st->n_files];
    memset(f, 0, sizeof *f);
    f->name = strdup(name);
    if (!f->name)
        return -1;
    f->parent = parent;
    f->included_at = included_at;
    return (int)st->n_files++;
}

/* Checks that span the whole load (the main file and its includes). */
static void check_load(load_state *st)
{
    pagid_config *c = st->c;
    if ((st->has_low || st->has_high) && c->low_watermark >= c->high_watermark) {
        src_pos at = st->has_low ? st->low_at : st->high_at;
        load_ctx x = {.c = c, .err = st->err, .st = st, .file = at.file};
        report_at(&x, at.line, at.col,
                  "'flow_control.low_watermark' (%zu) must be less than "
                  "'flow_control.high_watermark' (%zu)",
                  c->low_watermark, c->high_watermark);
    }
}

/* The `lib` directories of the load after those the config had; 0 or -1. */
static int finish_perl_lib(load_state *st)
{
    pagid_config *c = st->c;
    if (!buf_size(&st->perl_lib))
        return 0;
    buf joined = BUF_INIT;
    int rc = buf_printf(&joined, "%s%s", c->perl_lib ? c->perl_lib : "", c->perl_lib ? ":" : "");
    rc |= buf_append(&joined, buf_head(&st->perl_lib), buf_size(&st->perl_lib));
    rc |= buf_append(&joined, "", 1);
    if (rc) {
        buf_free(&joined);
        return -1;
    }
    free(c->perl_lib);
    c->perl_lib = joined.data; /* a buf's data is malloc'd; off is 0 */
    return 0;
}

static void free_load(load_state *st)
{
    strtab_free(&st->lib_seen);
    free(st->pool.handlers); /* a worker_pool whose app was refused */
    strtab_free(&st->apps_ok);
    buf_free(&st->perl_lib);
    for (size_t i = 0; i < st->n_files; i++)
        free(st->files[i].name);
    free(st->files);
    free(st->seen);
}

static int replace_source(pagid_config *c, const char *name)
{
    char *s = strdup(name);
    if (!s)
        return -1;
    free(c->source);
    c->source = s;
    return 0;
}

/* Load text as the main file `name`; id: its identity when it is a real file. */
static int load_main(pagid_config *c, const char *text, size_t len, const char *name,
                     const struct stat *id, FILE *err)
{
    load_state st = {.c = c, .err = err, .lib_seen = STRTAB_INIT, .apps_ok = STRTAB_INIT,
                     .perl_lib = BUF_INIT};
    src_pos none = {0, 0, 0};
    if (replace_source(c, name) < 0 || load_add_file(&st, name, -1, none) < 0) {
        fprintf(err, "%s: out of memory\n", name);
        free_load(&st);
        return 1;
    }
    if (id) {
        st.files[0].has_id = 1;
        st.files[0].dev = id->st_dev;
        st.files[0].ino = id->st_ino;
    }
    st.files[0].open = 1;
    load_text(&st, 0, 0, text, len);
    check_load(&st);
    if (finish_perl_lib(&st) < 0) {
        fprintf(err, "%s: out of memory\n", name);
        st.errors++;
    }
    free_load(&st);
    return st.errors;
}

int config_load_string(pagid_config *c, const char *yaml, const char *name, FILE *err)
{
    return load_main(c, yaml, strlen(yaml), name, NULL, err);
}

int config_load_file(pagid_config *c, const char *path, FILE *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        fprintf(err, "%s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    buf text = BUF_INIT;
    const char *problem = NULL;
    struct stat sb;
    int n = 1;
    /* Not only regular files: "pagid -t -c <(generate-config)" reads a pipe. */
    if (fstat(fd, &sb) < 0)
        problem = strerror(errno);
    else if (S_ISDIR(sb.st_mode))
        problem = strerror(EISDIR);
    else
        read_config_fd(fd, S_ISREG(sb.st_mode) ? (size_t)sb.st_size : 0, &text, &problem);
    close(fd);
    if (problem)
        fprintf(err, "%s: cannot read: %s\n", path, problem);
    else
        n = load_main(c, text.data ? buf_head(&text) : "", buf_size(&text), path, &sb, err);
    buf_free(&text);
    return n;
}

/*
 * config_yaml_shdict.c - the `shared_dicts` list (pagi_shared(3)): each
 * entry a mapping {name, size}, the name a plain unique word, the size
 * within the bounds a dictionary can have; every problem reported at its
 * own FILE:LINE:COLUMN.
 */
#include <stdlib.h>
#include <string.h>

#include "config_suggest.h"
#include "config_yaml_int.h"
#include "shdict.h"

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SHDICT_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

/* One entry into *out (name owned); 0, or -1 after reporting. */
static int parse_entry(load_ctx *x, const ynode *n, const char *path, pagid_shared_dict *out)
{
    static const char *const keys[] = {"name", "size", NULL};
    char shown[80];
    const ynode *name = NULL, *size = NULL;
    if (n->type != YAML_MAPPING_NODE) {
        report(x, n, "each of '%s' must be a mapping {name: NAME, size: SIZE}, not %s", path,
               kind_name(n));
        return -1;
    }
    int bad = 0;
    for (size_t p = 0; p < n->len; p++) {
        const ynode *k = key_at(x, n, p), *v = value_at(x, n, p);
        const char *ks = k->type == YAML_SCALAR_NODE ? k->value : "";
        const ynode **slot = !strcmp(ks, "name") ? &name : !strcmp(ks, "size") ? &size : NULL;
        if (!slot) {
            const char *near = config_suggest_among(ks, strlen(ks), keys);
            report(x, k, "unknown key '%s' in '%s'%s%s%s", printable(k, shown, sizeof shown), path,
                   near ? " (did you mean '" : " (expected name or size)", near ? near : "",
                   near ? "'?)" : "");
            bad = 1;
        } else if (*slot) {
            report(x, k, "duplicate key '%s' in '%s'", ks, path);
            bad = 1;
        } else
            *slot = v;
    }
    if (bad)
        return -1;
    if (!name || !size) {
        report(x, n, "each of '%s' needs a name and a size", path);
        return -1;
    }
    const char *ns = scalar(x, name, path), *ss = scalar(x, size, path);
    if (!ns || !ss)
        return -1;
    if (!name_ok(ns)) {
        report(x, name, "invalid name '%s' in '%s' (1 to %d of A-Z a-z 0-9 _ - .)",
               printable(name, shown, sizeof shown), path, SHDICT_NAME_MAX);
        return -1;
    }
    size_t v;
    if (config_parse_size(ss, &v) < 0) {
        report(x, size, "invalid size '%s' in '%s' (expected e.g. 64k, 16m, 1g)",
               printable(size, shown, sizeof shown), path);
        return -1;
    }
    if (v < SHDICT_MIN_SIZE || v > SHDICT_MAX_SIZE) {
        report(x, size, "size of '%s' in '%s' must be from 32k to 1t", ns, path);
        return -1;
    }
    out->name = strdup(ns);
    if (!out->name) {
        report(x, n, "out of memory");
        return -1;
    }
    out->size = v;
    out->pos = keep_pos(x, name);
    out->dict = NULL;
    return 0;
}

void set_shared_dicts(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    (void)k;
    pagid_config *c = x->c;
    if (n->type != YAML_SEQUENCE_NODE) {
        report(x, n, "'%s' must be a list of {name: NAME, size: SIZE}, not %s", path, kind_name(n));
        return;
    }
    pagid_shared_dict *list = n->len ? calloc(n->len, sizeof *list) : NULL;
    if (n->len && !list) {
        report(x, n, "out of memory");
        return;
    }
    size_t used = 0;
    for (size_t i = 0; i < n->len; i++) {
        const ynode *item = item_at(x, n, i);
        if (parse_entry(x, item, path, &list[used]) < 0)
            continue;
        size_t j = 0;
        while (j < used && strcmp(list[j].name, list[used].name))
            j++;
        if (j < used) {
            char where[POS_TEXT_MAX];
            src_pos first = {x->file, list[j].pos.line, list[j].pos.col};
            report(x, item, "duplicate shared dict '%s' (first at %s)", list[used].name,
                   pos_text(x->st, first, where, sizeof where));
            free(list[used].name);
            continue;
        }
        used++;
    }
    for (size_t i = 0; i < c->n_shared_dicts; i++)
        free(c->shared_dicts[i].name);
    free(c->shared_dicts);
    c->shared_dicts = list;
    c->n_shared_dicts = used;
}

/*
 * config_yaml_pubsub.c - the `pubsub:` section's values that need more than
 * a plain setter: the backend's name, its url (parsed now, so a bad one is
 * reported at its own FILE:LINE:COLUMN), the channel prefix and the origins
 * the `pubsub` app allows (each checked at its own position).
 */
#include <stdlib.h>
#include <string.h>

#include "config_suggest.h"
#include "config_yaml_int.h"
#include "origin.h"
#include "redis_url.h"

void set_pubsub_backend(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    static const char *const names[] = {"local", "redis", NULL};
    const char *s = scalar(x, n, path);
    char shown[80];
    if (!s)
        return;
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(s, names[i])) {
            x->c->pubsub.backend = (pubsub_backend_kind)i;
            x->c->pubsub.backend_pos = keep_pos(x, n);
            return;
        }
    const char *near = config_suggest_among(s, strlen(s), names);
    if (near)
        report(x, n, "invalid '%s' '%s' (did you mean '%s'?)", path,
               printable(n, shown, sizeof shown), near);
    else
        report(x, n, "invalid '%s' '%s' (expected local or redis)", path,
               printable(n, shown, sizeof shown));
}

void set_pubsub_url(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    if (n->type == YAML_SCALAR_NODE && is_null(n)) { /* ~: no url */
        free(x->c->pubsub.url);
        x->c->pubsub.url = NULL;
        x->c->pubsub.url_pos = (pagid_pos){0};
        return;
    }
    const char *s = scalar(x, n, path);
    char shown[80];
    const char *msg;
    redis_url u;
    if (!s)
        return;
    if (redis_url_parse(s, &u, &msg) < 0) {
        /* The text may hold a password: past an '@', show only the scheme. */
        const char *scheme = strstr(s, "://");
        int secret = strchr(s, '@') != NULL;
        size_t shown_len = !secret ? n->len : scheme ? (size_t)(scheme - s) : 0;
        report(x, n, "invalid '%s' '%s%s': %s", path,
               printable_text(s, shown_len, shown, sizeof shown), secret ? "://..." : "", msg);
        return;
    }
    char *dup = strdup(s);
    if (!dup) {
        report(x, n, "out of memory");
        return;
    }
    free(x->c->pubsub.url);
    x->c->pubsub.url = dup;
    x->c->pubsub.url_pos = keep_pos(x, n);
}

void set_pubsub_prefix(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    /* null or "" means no prefix: channel names go to the backend as they are. */
    const char *s = n->type == YAML_SCALAR_NODE && is_null(n) ? "" : scalar(x, n, path);
    if (!s)
        return;
    if (strlen(s) > 64) {
        report(x, n, "'%s' must be at most 64 bytes", path);
        return;
    }
    char *dup = strdup(s);
    if (!dup) {
        report(x, n, "out of memory");
        return;
    }
    free(x->c->pubsub.prefix);
    x->c->pubsub.prefix = dup;
}

void set_pubsub_origins(load_ctx *x, const key_def *k, const ynode *n, const char *path)
{
    if (n->type != YAML_SEQUENCE_NODE) {
        report(x, n, "'%s' must be a list of origins (scheme://host[:port], or \"*\"), not %s",
               path, kind_name(n));
        return;
    }
    pagid_pubsub *p = &x->c->pubsub;
    for (size_t i = 0; i < p->n_allowed_origins; i++)
        free(p->allowed_origins[i]);
    free(p->allowed_origins);
    p->allowed_origins = NULL;
    p->n_allowed_origins = 0;
    if (n->len == 0)
        return;
    p->allowed_origins = calloc(n->len, sizeof *p->allowed_origins);
    if (!p->allowed_origins) {
        report(x, n, "out of memory");
        return;
    }
    for (size_t i = 0; i < n->len; i++) {
        const ynode *item = item_at(x, n, i);
        const char *s = scalar(x, item, path);
        char norm[ORIGIN_MAX], shown[80];
        const char *why = NULL;
        if (!s)
            continue;
        if (strcmp(s, "*") && origin_normalize(s, strlen(s), norm, sizeof norm, &why) < 0) {
            report(x, item, "invalid origin '%s' in '%s': %s", printable(item, shown, sizeof shown),
                   path, why);
            continue;
        }
        char *dup = strdup(strcmp(s, "*") ? norm : "*");
        if (!dup) {
            report(x, item, "out of memory");
            return;
        }
        p->allowed_origins[p->n_allowed_origins++] = dup;
    }
}

/*
 * shdicts.c - shared dictionaries across generations (see shdicts.h): the
 * master makes each one before forking, and a reload with the same name
 * and size hands the very mapping to the new generation.
 */
#include "shdicts.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/shdict.h"

static shdict *find_live(const generation *all, const pagid_config *self, const char *name,
                         size_t size)
{
    for (const generation *g = all; g; g = g->next) {
        if (g->cfg == self)
            continue;
        for (size_t i = 0; i < g->cfg->n_shared_dicts; i++) {
            const pagid_shared_dict *e = &g->cfg->shared_dicts[i];
            if (e->dict && e->size == size && !strcmp(e->name, name))
                return e->dict;
        }
    }
    return NULL;
}

int shdicts_attach(pagid_config *cfg, const generation *all)
{
    for (size_t i = 0; i < cfg->n_shared_dicts; i++) {
        pagid_shared_dict *e = &cfg->shared_dicts[i];
        e->dict = find_live(all, cfg, e->name, e->size);
        if (e->dict) {
            log_info("shared dict '%s' (%zu bytes) kept", e->name, e->size);
            continue;
        }
        e->dict = shdict_create(e->name, e->size);
        if (!e->dict) {
            log_error("cannot map shared dict '%s' (%zu bytes): %s", e->name, e->size,
                      strerror(errno));
            shdicts_detach(cfg, all);
            return -1;
        }
    }
    return 0;
}

void shdicts_detach(pagid_config *cfg, const generation *others)
{
    for (size_t i = 0; i < cfg->n_shared_dicts; i++) {
        pagid_shared_dict *e = &cfg->shared_dicts[i];
        int used = 0;
        for (const generation *g = others; g && !used && e->dict; g = g->next)
            for (size_t j = 0; g->cfg != cfg && j < g->cfg->n_shared_dicts; j++)
                used |= g->cfg->shared_dicts[j].dict == e->dict;
        if (e->dict && !used)
            shdict_destroy(e->dict);
        e->dict = NULL;
    }
}

/*
 * preload.c - what pagid's zygote loads before it forks workers: each app
 * spec of the config resolved as a worker would, so that the expensive part
 * (compiling a Perl app and the modules it uses, mapping a .so) happens
 * once per generation instead of once per worker.
 */
#include "preload.h"

#include <stdio.h>
#include <string.h>

#include "app_registry.h"
#ifdef PAGID_WITH_PERL
#include "perl/perl_host.h"
#endif

static int preload_one(const char *spec, char *err, size_t errlen)
{
#ifdef PAGID_WITH_PERL
    if (config_perl_app_kind(spec))
        return perl_host_preload(spec, err, errlen);
#endif
    /* A module's mapping stays (app_registry_unload never dlcloses):
     * the worker's dlopen of the same path takes a reference to it. */
    app_handle h;
    if (app_registry_load(spec, &h, err, errlen) < 0)
        return -1;
    app_registry_unload(&h);
    return 0;
}

int worker_preload(const pagid_config *cfg, char *err, size_t errlen)
{
    int r = preload_one(cfg->app, err, errlen);
    for (size_t i = 0; r == 0 && i < cfg->n_mounts; i++)
        r = preload_one(cfg->mounts[i].app, err, errlen);
    return r;
}

void worker_preload_before_fork(void)
{
#ifdef PAGID_WITH_PERL
    perl_host_flush_output();
#endif
}

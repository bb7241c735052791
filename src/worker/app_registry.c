/*
 * app_registry.c - built-in apps by name, modules by path (dlopen). A
 * module must export PAGI_MODULE_SYMBOL built against this server's ABI major
 * and a minor no newer than its own.
 */
#include "app_registry.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/module_abi.h"
#include "worker/apps/builtin.h"
#ifdef PAGID_WITH_PERL
#include "perl/perl_host.h"
#endif

static const struct {
    const char *name;
    const pagi_app *app;
} builtin_apps[] = {
    {"hello", &app_hello},
    {"echo", &app_echo},
    {"static", &app_static},
    {"demo", &app_demo},
    {"pubsub", &app_pubsub},
};

static int load_module(const char *spec, app_handle *out, char *err, size_t errlen)
{
    /* dlopen searches the library path for a name without a slash: a
     * relative app path means the working directory, as everywhere else. */
    char local[4096];
    const char *path = spec;
    if (!strchr(spec, '/') && snprintf(local, sizeof local, "./%s", spec) < (int)sizeof local)
        path = local;
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    char abi[256];
    if (!dl) {
        /* A module of a newer minor fails here on a function this server
         * lacks: its table, read from the file (a second dlopen would run
         * its constructors again), names the versions instead. */
        snprintf(err, errlen, "cannot load app module %s: %s", spec, dlerror());
        module_table_info t;
        const char *why;
        if (module_abi_read(path, &t, &why) == 0 &&
            module_abi_problem(t.abi, abi, sizeof abi))
            snprintf(err, errlen, "app module %s %s", spec, abi);
        return -1;
    }
    const pagi_app *app = dlsym(dl, PAGI_MODULE_SYMBOL);
    const char *problem = NULL;
    if (!app)
        problem = "does not export '" PAGI_MODULE_SYMBOL "'";
    else if (!(problem = module_abi_problem(app->abi_version, abi, sizeof abi)) &&
             !(problem = module_reserved_problem(app->reserved, sizeof app->reserved /
                                                                    sizeof app->reserved[0])) &&
             !app->handle)
        problem = "has no handle function";
    if (problem) {
        snprintf(err, errlen, "app module %s %s", spec, problem);
        dlclose(dl);
        return -1;
    }
    out->app = app;
    out->dl = dl;
    return 0;
}

int app_registry_load(const char *spec, app_handle *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* Built-in names first: their argument may well be a path ("static:/srv/www"). */
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    for (size_t i = 0; i < sizeof builtin_apps / sizeof builtin_apps[0]; i++) {
        if (strlen(builtin_apps[i].name) == nlen && strncmp(builtin_apps[i].name, spec, nlen) == 0) {
            out->app = builtin_apps[i].app;
            if (colon && !(out->arg = strdup(colon + 1))) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            return 0;
        }
    }
#ifdef PAGID_WITH_PERL
    if (config_perl_app_kind(spec)) { /* .pl or .psgi: the host tells them apart */
        out->app = &app_perl;
        if (!(out->arg = strdup(spec))) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
#endif
    char path[4096];
    int mlen = config_module_path(spec, path, sizeof path);
    if (mlen < 0) {
        snprintf(err, errlen, "app module path too long");
        return -1;
    }
    if (mlen && spec[mlen] == ':') {
        /* PATH.so:ARG: ARG is the module's create argument. */
        if (load_module(path, out, err, errlen) < 0)
            return -1;
        if (!(out->arg = strdup(spec + mlen + 1))) {
            app_registry_unload(out);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    if (mlen || strchr(spec, '/'))
        return load_module(spec, out, err, errlen);
    snprintf(err, errlen, "unknown app '%s'", spec);
    return -1;
}

void app_registry_unload(app_handle *h)
{
    free(h->arg);
    /* Modules stay mapped until exit: callbacks may still point into them. */
    memset(h, 0, sizeof *h);
}

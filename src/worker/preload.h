/*
 * preload.h - load a config's apps into a process that will fork workers
 * (pagid's zygote), so their compiled code is shared copy-on-write.
 */
#ifndef PAGID_PRELOAD_H
#define PAGID_PRELOAD_H

#include <stddef.h>

#include "common/config.h"

/**
 * Load what can be loaded before fork, in the order the workers' mount
 * table creates the apps: a Perl app's interpreter and compiled file (its
 * create in each worker takes the compiled code instead of loading it
 * again), a .so module's mapping (the worker's dlopen finds it loaded).
 * Built-ins have nothing to load. No app instance is created and no loop
 * exists: lifespan and everything per worker still happen in each worker.
 * 0, or -1 with a message in err (the app cannot load: no worker could),
 * or -2 with the reason in err when an app can load but not be preloaded
 * (it starts event watchers while loading: each worker must load it).
 */
int worker_preload(const pagid_config *cfg, char *err, size_t errlen);

/**
 * Before the preloading process forks: flush what the loaded apps buffered
 * (Perl's PerlIO handles, which fflush does not reach), so the children do
 * not each write it again.
 */
void worker_preload_before_fork(void);

#endif

/*
 * builtin.h - the apps compiled into pagid.
 */
#ifndef PAGID_APPS_BUILTIN_H
#define PAGID_APPS_BUILTIN_H

#include <pagi/pagi.h>

extern const pagi_app app_hello;
extern const pagi_app app_echo;
extern const pagi_app app_demo;
extern const pagi_app app_static;
extern const pagi_app app_pubsub;

/* Options of the static app that only the config's mapping form can set. */
typedef struct static_options {
    int listing;          /* HTML index of directories without index.html */
    int follow_symlinks;  /* symlinks may lead out of the directory */
    size_t cache_entries; /* files remembered (0 = none); see static_cache.h */
    size_t cache_bytes;   /* bytes of small files held in memory */
    double cache_valid;   /* seconds a remembered lookup is trusted */
} static_options;

/** app_static's create with options (its plain create uses the defaults). */
void *static_app_create(const char *dir, const static_options *o, pagi_loop *loop,
                        const char **err);

/** app_pubsub's create with the origins (origin.h normal forms, "*") its
 * pages may come from besides each request's own; copied. */
void *pubsub_app_create(char *const *origins, size_t n, pagi_loop *loop, const char **err);

#endif

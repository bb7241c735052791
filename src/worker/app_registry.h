/*
 * app_registry.h - resolving an app spec ("hello", "static:DIR",
 * "/path/app.so") to a pagi_app: the built-in table, or dlopen with an ABI
 * check.
 */
#ifndef PAGID_APP_REGISTRY_H
#define PAGID_APP_REGISTRY_H

#include <pagi/pagi.h>

typedef struct app_handle {
    const pagi_app *app;
    char *arg;   /* what followed ':' (owned), or NULL */
    void *dl;    /* dlopen handle, or NULL for built-ins */
} app_handle;

/** Resolve spec; 0, or -1 with a message in err. */
int app_registry_load(const char *spec, app_handle *out, char *err, size_t errlen);
void app_registry_unload(app_handle *h);

#endif

/*
 * fuzz_config.c - libFuzzer harness for the YAML config loader.
 * The input is the text of a pagid.yaml: loaded over the defaults with
 * config_load_string, then (when valid) finalized, then freed. It must never
 * crash, read out of bounds or leak (LeakSanitizer runs at exit and every
 * -detect_leaks round). Errors go to /dev/null; the count must agree with
 * what was printed: a positive count prints at least one FILE:LINE:COL line.
 * Built by run.sh only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; /* config_load_string takes a C string: stops at a NUL */

    char *msgs = NULL;
    size_t msgs_len = 0;
    FILE *err = open_memstream(&msgs, &msgs_len);
    if (!err)
        abort();

    pagid_config c;
    config_init_defaults(&c);
    int n = config_load_string(&c, text, "fuzz.yaml", err);
    if (n < 0)
        abort();
    if (n == 0)
        (void)config_finalize(&c, err);
    fflush(err);
    if (n > 0 && msgs_len == 0)
        abort(); /* an error counted but not reported */
    if (n > 0 && strncmp(msgs, "fuzz.yaml", 9) != 0)
        abort(); /* every message names the file */
    /* What was loaded is a consistent model: walk it. */
    for (size_t i = 0; i < c.n_listens; i++) {
        if (!c.listens[i].spec)
            abort();
        if (c.listens[i].kind == LISTEN_UNIX && !c.listens[i].path)
            abort();
    }
    for (size_t i = 0; i < c.n_mounts; i++)
        if (!c.mounts[i].path || c.mounts[i].path[0] != '/' || !c.mounts[i].app)
            abort();
    if (c.app)
        (void)strlen(c.app);
    config_free(&c);
    fclose(err);
    free(msgs);
    free(text);
    return 0;
}

/*
 * fuzz_config.c - libFuzzer harness for the YAML config loader.
 * The input is the text of a pagid.yaml: loaded over the defaults with
 * config_load_string, then (when valid) finalized, then freed. It must never
 * crash, read out of bounds or leak (LeakSanitizer runs at exit and every
 * -detect_leaks round). Errors go to /dev/null; the count must agree with
 * what was printed: a positive count prints at least one FILE:LINE:COL line.
 * A valid config also goes through config_dump (pagid -T): the dump must
 * load without errors and dump to the very same text.
 * Built by run.sh only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/config_dump.h"

/* c's dump, loaded and dumped again, is the same text. */
static void check_dump(const pagid_config *c)
{
    char *one = NULL, *two = NULL, *msgs = NULL;
    size_t len1 = 0, len2 = 0, len3 = 0;
    FILE *f = open_memstream(&one, &len1), *g = open_memstream(&two, &len2),
         *err = open_memstream(&msgs, &len3);
    if (!f || !g || !err || config_dump(c, f) != 0)
        abort();
    fclose(f);
    pagid_config d;
    config_init_defaults(&d);
    if (config_load_string(&d, one, "dump.yaml", err) != 0 || config_finalize(&d, err) != 0)
        abort(); /* the dump of a valid config is a valid config */
    if (config_dump(&d, g) != 0)
        abort();
    fclose(g);
    fclose(err);
    if (len1 != len2 || memcmp(one, two, len1) != 0)
        abort(); /* and it loads to the same model */
    config_free(&d);
    free(one);
    free(two);
    free(msgs);
}

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
    if (n == 0 && config_finalize(&c, err) == 0)
        check_dump(&c);
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

/*
 * fuzz_config.c - libFuzzer harness for the YAML config loader.
 * The input is the text of a pagid.yaml: loaded over the defaults with
 * config_load_string, then (when valid) finalized, then freed. It must never
 * crash, read out of bounds or leak (LeakSanitizer runs at exit and every
 * -detect_leaks round). Errors go to a memory stream; the count must agree
 * with what was printed: a positive count prints at least one line, and
 * every line names its file (an absolute path, see below). A valid config
 * also goes through config_dump (pagid -T): the dump must load without
 * errors and dump to the very same text.
 *
 * `include:` reads files, so the input is loaded as DIR/fuzz.yaml where DIR
 * is a scratch directory made at startup with a few files to include: a
 * cycle, a glob directory, a broken file, a chain deeper than the limit, a
 * FIFO (see make_files; the seeds name them). Relative includes resolve in
 * DIR. Built by run.sh only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static char dir[64];
static char name[96];

static void put(const char *rel, const char *text)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        abort();
}

static void remove_files(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_config: could not remove %s\n", dir);
}

static void make_files(void)
{
    char path[160];
    strcpy(dir, "/tmp/pagid-fuzz-config-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    atexit(remove_files);
    snprintf(name, sizeof name, "%s/fuzz.yaml", dir);
    snprintf(path, sizeof path, "%s/conf.d", dir);
    if (mkdir(path, 0700) < 0)
        abort();
    put("a.yaml", "workers: 2\ninclude: b.yaml\n");
    put("b.yaml", "limits: {max_body_size: 1k}\ninclude: [a.yaml, empty.yaml]\n");
    put("empty.yaml", "");
    put("mounts.yaml", "mounts: [{path: /m, app: echo}]\nlisten: ':8083'\n");
    put("conf.d/10-listen.yaml", "listen: [':8081', 'unix:/tmp/pagid-fuzz.sock']\n");
    put("conf.d/20-timeouts.yaml", "timeouts: {idle: 1s}\nflow_control: {low_watermark: 1m}\n");
    put("conf.d/30-bad.yaml", "limts: [\n");
    for (int i = 1; i <= 10; i++) { /* d1 -> ... -> d10: past the depth limit */
        char rel[16], text[32];
        snprintf(rel, sizeof rel, "d%d.yaml", i);
        snprintf(text, sizeof text, "include: d%d.yaml\n", i + 1);
        put(rel, i < 10 ? text : "app: hello\n");
    }
    snprintf(path, sizeof path, "%s/fifo", dir);
    if (mkfifo(path, 0600) < 0)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    make_files();
    return 0;
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
    int n = config_load_string(&c, text, name, err);
    if (n < 0)
        abort();
    if (n == 0 && config_finalize(&c, err) == 0)
        check_dump(&c);
    fflush(err);
    if (n > 0 && msgs_len == 0)
        abort(); /* an error counted but not reported */
    /* Every message names its file: DIR/..., or an absolute include. */
    for (const char *line = msgs; n > 0 && *line;) {
        if (*line != '/')
            abort();
        const char *nl = strchr(line, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
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

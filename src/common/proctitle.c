/*
 * proctitle.c - set the process title the way nginx's ngx_setproctitle and
 * Redis's setproctitle.c do: the kernel shows /proc/PID/cmdline from the
 * memory that held argv's strings, and the environment strings follow them
 * contiguously, so after moving both to the heap that whole range is ours
 * to write. prctl(PR_SET_NAME) is deliberately not used: the comm name
 * ("pagid") is what pkill -x, pidof and the logrotate script match.
 */
#include "proctitle.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static char *area;      /* first byte of argv[0]'s original string */
static size_t area_len; /* up to the end of the last contiguous string */
static char *cmdline;   /* the original arguments joined by spaces */
static size_t shown;    /* bytes of the title shown now (the rest is NUL) */
/* The copies stay reachable from here for LeakSanitizer, whatever libc does
 * to environ (unsetenv drops entries, setenv replaces the array); volatile,
 * or the compiler drops stores nobody reads. */
static char **volatile env_copy;  /* owns the environment strings */
static char **volatile env_array; /* what environ pointed to first */
static char **volatile argv_copy;

/* Extend end over s if s starts exactly there; 1 when it did. */
static int extend(char **end, char *s)
{
    if (!s || s != *end)
        return 0;
    *end = s + strlen(s) + 1;
    return 1;
}

static char **copy_vector(char **v, size_t n)
{
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        if (!(out[i] = strdup(v[i]))) {
            while (i > 0)
                free(out[--i]);
            free(out);
            return NULL;
        }
    }
    return out;
}

int proctitle_init(int argc, char **argv)
{
    if (area)
        return 0;
    if (argc < 1 || !argv || !argv[0])
        return -1;
    char *start = argv[0], *end = argv[0];
    for (int i = 0; i < argc && extend(&end, argv[i]); i++)
        ;
    size_t n_env = 0;
    while (environ && environ[n_env])
        n_env++;
    /* Only environment strings right behind argv's belong to the area. */
    for (size_t i = 0; i < n_env && extend(&end, environ[i]); i++)
        ;

    size_t joined = 0;
    for (int i = 0; i < argc; i++)
        joined += strlen(argv[i]) + 1;
    char *no_env[] = {NULL};
    char **av = copy_vector(argv, (size_t)argc);
    char **ev = copy_vector(n_env ? environ : no_env, n_env);
    char **env = calloc(n_env + 1, sizeof *env);
    char *line = malloc(joined);
    if (!av || !ev || !env || !line) {
        for (size_t i = 0; av && av[i]; i++)
            free(av[i]);
        for (size_t i = 0; ev && ev[i]; i++)
            free(ev[i]);
        free(av);
        free(ev);
        free(env);
        free(line);
        return -1;
    }
    char *p = line;
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(av[i]);
        if (i)
            *p++ = ' ';
        memcpy(p, av[i], len);
        p += len;
    }
    *p = '\0';
    /* From here on nothing may read the old strings: point everyone at the copies. */
    for (int i = 0; i < argc; i++)
        argv[i] = av[i];
    memcpy(env, ev, n_env * sizeof *env);
    environ = env;
    program_invocation_name = av[0];
    char *slash = strrchr(av[0], '/');
    program_invocation_short_name = slash ? slash + 1 : av[0];
    argv_copy = av;
    env_copy = ev;
    env_array = env;
    cmdline = line;
    area = start;
    area_len = (size_t)(end - start);
    return 0;
}

/* Shows title (len bytes): only the bytes that change are written, since
 * a pool process retitles itself twice a request. */
static void put_title(const char *title, size_t len)
{
    if (len > area_len - 1)
        len = area_len - 1;
    memcpy(area, title, len);
    /* NUL padding: the kernel then shows just the title (old arguments
     * and environment must not leak into ps output); past what was shown
     * it is NUL already, but for the first title. */
    if (!shown)
        shown = area_len;
    if (shown > len)
        memset(area + len, '\0', shown - len);
    shown = len;
}

void proctitle_set(const char *fmt, ...)
{
    if (!area || area_len < 2)
        return;
    char title[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(title, sizeof title, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    put_title(title, (size_t)n < sizeof title ? (size_t)n : sizeof title - 1);
}

void proctitle_master(const char *state)
{
    if (state)
        proctitle_set("pagid: master process (%s) %s", state, cmdline ? cmdline : "");
    else
        proctitle_set("pagid: master process %s", cmdline ? cmdline : "");
}

void proctitle_worker(int num, unsigned generation, int draining)
{
    proctitle_set("pagid: worker %d (generation %u%s)", num, generation,
                  draining ? ", draining" : "");
}

void proctitle_pool(int num, unsigned generation, const char *state)
{
    /* Per request: the part before the state is formatted once. */
    static char head[96];
    static size_t head_len;
    static int head_num = -1;
    static unsigned head_generation;
    if (!area || area_len < 2)
        return;
    if (num != head_num || generation != head_generation) {
        int n =
            snprintf(head, sizeof head, "pagid: pool process %d (generation %u, ", num, generation);
        if (n < 0 || (size_t)n >= sizeof head)
            n = 0;
        head_len = (size_t)n;
        head_num = num;
        head_generation = generation;
    }
    char title[160];
    size_t slen = strlen(state);
    if (!head_len || head_len + slen + 1 > sizeof title) {
        proctitle_set("pagid: pool process %d (generation %u, %s)", num, generation, state);
        return;
    }
    memcpy(title, head, head_len);
    memcpy(title + head_len, state, slen);
    title[head_len + slen] = ')';
    put_title(title, head_len + slen + 1);
}

void proctitle_zygote(unsigned generation)
{
    proctitle_set("pagid: zygote (generation %u)", generation);
}

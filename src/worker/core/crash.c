/*
 * crash.c - the crash line (see crash.h). The hot path only stores a few
 * pointers; the handler formats them with nothing but stores and write(2),
 * then restores the previous disposition and re-raises the signal.
 */
#include "crash.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

crash_note crash_current;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGILL};
#define N_FATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction previous[N_FATAL];
/* A stack overflow must still be able to run the handler. */
static char alt_stack[64 * 1024];

typedef struct line {
    char b[1024];
    size_t n;
} line;

/* Printable bytes only: a decoded path may hold control characters. */
static void put(line *l, const char *s, size_t max)
{
    for (size_t i = 0; i < max && s[i] && l->n < sizeof l->b; i++) {
        unsigned char c = (unsigned char)s[i];
        l->b[l->n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
}

static void put_int(line *l, long v)
{
    char d[24];
    size_t k = sizeof d;
    d[--k] = '\0';
    int neg = v < 0;
    unsigned long u = neg ? (unsigned long)-v : (unsigned long)v;
    do
        d[--k] = (char)('0' + u % 10);
    while ((u /= 10) && k > 1);
    if (neg)
        d[--k] = '-';
    put(l, d + k, sizeof d);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGABRT:
        return "SIGABRT";
    case SIGILL:
        return "SIGILL";
    }
    return "signal";
}

static void on_fatal(int sig)
{
    line l = {.n = 0};
    put(&l, "worker crashed: ", 64);
    put(&l, signal_name(sig), 16);
    put(&l, " (signal ", 16);
    put_int(&l, sig);
    put(&l, ")", 2);
    const char *kind = crash_current.kind;
    if (kind) {
        put(&l, " in an app's ", 16);
        put(&l, kind, 64);
        put(&l, " callback", 16);
        if (crash_current.method && crash_current.path) {
            put(&l, " serving ", 16);
            put(&l, crash_current.method, 32);
            put(&l, " ", 2);
            put(&l, crash_current.path,
                crash_current.path_len < 512 ? crash_current.path_len : 512);
        }
        if (crash_current.client) {
            put(&l, " for ", 8);
            put(&l, crash_current.client, 64);
            put(&l, ":", 2);
            put_int(&l, crash_current.port);
        }
    } else {
        put(&l, " outside app code", 32);
    }
    log_write_signal_safe(LOG_LVL_ERROR, l.b, l.n);
    /* As if we had never been here: the default action (a core, the
     * master's "crashed (signal N)") or a sanitizer's own report. */
    for (size_t i = 0; i < N_FATAL; i++)
        if (fatal_signals[i] == sig)
            sigaction(sig, &previous[i], NULL);
    raise(sig);
}

void crash_install(void)
{
    stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_FATAL; i++)
        sigaction(fatal_signals[i], &sa, &previous[i]);
}

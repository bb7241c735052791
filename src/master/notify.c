/*
 * notify.c - sd_notify for the master. The supervisor decides when (READY
 * only once every worker passed lifespan startup, WATCHDOG while its own
 * loop turns: blocked workers are the heartbeat's to kill); this file only
 * says it.
 */
#include "notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "common/log.h"

static int enabled;
static uint64_t watchdog_usec;

void notify_init(void)
{
    const char *s = getenv("NOTIFY_SOCKET");
    enabled = s && *s;
    uint64_t usec = 0;
    watchdog_usec = sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

int notify_enabled(void)
{
    return enabled;
}

void notify_send(const char *state)
{
    if (enabled && sd_notify(0, state) < 0)
        log_warn("sd_notify failed");
}

void notify_sendf(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    notify_send(buf);
}

void notify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned long long usec =
        (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000ull;
    notify_sendf("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading", usec);
}

double notify_watchdog_interval(void)
{
    return (double)watchdog_usec / 1e6;
}

void notify_watchdog_ping(void)
{
    if (watchdog_usec)
        notify_send("WATCHDOG=1");
}

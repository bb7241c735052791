/*
 * notify.h - the master's side of systemd's notify protocol (Type=notify):
 * READY, RELOADING with MONOTONIC_USEC, STOPPING, STATUS and the watchdog.
 * Every call is a no-op when NOTIFY_SOCKET is unset.
 */
#ifndef PAGID_NOTIFY_H
#define PAGID_NOTIFY_H

#include <stdint.h>

/** Read NOTIFY_SOCKET and WatchdogSec (the variables stay for children to ignore). */
void notify_init(void);
/** Is a service manager listening? */
int notify_enabled(void);
/** Send raw "KEY=VALUE\n..." lines. */
void notify_send(const char *state);
void notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** RELOADING=1 with MONOTONIC_USEC, as systemd's reload protocol wants. */
void notify_reloading(void);
/** Watchdog interval in seconds (0 when off); pings are due every half of it. */
double notify_watchdog_interval(void);
void notify_watchdog_ping(void);

#endif

/*
 * devwatch.h - --dev's reload on change: the master watches the app's files
 * and modules with inotify and reloads (as SIGHUP does) ~200 ms after the
 * last change.
 */
#ifndef PAGID_DEVWATCH_H
#define PAGID_DEVWATCH_H

#include <poll.h>

#include "cli.h"
#include "common/config.h"

typedef struct devwatch devwatch;

/**
 * Watch cfg's Perl app files (their directories), the lib/ beside each,
 * the -I and `lib` trees and the config file; open the pipe the workers
 * report the files they loaded on (PAGID_DEV_REPORT_FD, set here for the
 * workers to inherit). NULL (after a warning) when inotify is unavailable.
 */
devwatch *devwatch_new(const pagid_config *cfg, const cli_options *o);
void devwatch_free(devwatch *d);
/** The fds to poll (at most 2) into out; their count (0 for NULL). */
int devwatch_pollfds(const devwatch *d, struct pollfd *out);
/** Read what is ready on those fds; a relevant change arms the debounce. */
void devwatch_io(devwatch *d, double now);
/** When the debounced reload is due (INFINITY: none). */
double devwatch_deadline(const devwatch *d);
/** The changed file when a reload is due now (and disarm), else NULL. */
const char *devwatch_due(devwatch *d, double now);

#endif

/*
 * preflight.h - pagid -t's look at the system: what would make a valid
 * configuration fail to start on this host, found without binding,
 * creating or starting anything.
 */
#ifndef PAGID_PREFLIGHT_H
#define PAGID_PREFLIGHT_H

#include <stdio.h>

#include "common/config.h"

/**
 * Check c against this host: the workers' user and group exist (and who
 * they will be, when that is the fallback or root), every TCP listen
 * address resolves and is assigned here, unix socket directories exist,
 * the error log, the pid file and (as the workers' user) the access log
 * and app modules can be opened. Problems are printed to err as
 * "FILE:LINE:COLUMN: message" when the value came from the file, else
 * "pagid: message"; warnings the same way with "warning: "; notes go to
 * out. Returns the number of errors (warnings do not count).
 */
int preflight_check(const pagid_config *c, FILE *out, FILE *err);

#endif

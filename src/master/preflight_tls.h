/*
 * preflight_tls.h - pagid -t's look at a TLS listener: its contexts built
 * as the start builds them, then each certificate file's chain order and
 * validity dates, and the private keys' permissions.
 */
#ifndef PAGID_PREFLIGHT_TLS_H
#define PAGID_PREFLIGHT_TLS_H

#include <stdio.h>

#include "common/config.h"

/** Days before notAfter from which pagid -t warns. */
#define PREFLIGHT_TLS_EXPIRY_WARN_DAYS 14

/**
 * Check listener l (l->tls set). Errors and "warning: " lines go to err as
 * "FILE:LINE:COLUMN: message"; returns the number of errors.
 */
int preflight_tls_check(const pagid_config *c, const pagid_listen *l, FILE *err);

/**
 * Only the look at the files (chain order, dates, key modes), not the
 * build: what the start and every reload also run once the contexts are
 * built (a certificate about to expire is worth a line in the log each time
 * it is loaded). Returns the number of errors; *fatal (if not NULL) grows by
 * those that must stop a start or reload: a server certificate (leaf)
 * expired or not yet valid, which no client accepts.
 */
int preflight_tls_files(const pagid_config *c, const pagid_listen *l, FILE *err, int *fatal);

#endif

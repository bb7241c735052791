/*
 * preflight_tls.h - pagid -t's look at a TLS listener: its contexts built
 * as the start builds them, then each certificate file's chain order and
 * validity dates, and the private keys' permissions.
 */
#ifndef PAGID_PREFLIGHT_TLS_H
#define PAGID_PREFLIGHT_TLS_H

#include <stdio.h>

#include "../common/config.h"

/** Days before notAfter from which pagid -t warns. */
#define PREFLIGHT_TLS_EXPIRY_WARN_DAYS 14

/**
 * Check listener l (l->tls set). Errors and "warning: " lines go to err as
 * "FILE:LINE:COLUMN: message"; returns the number of errors.
 */
int preflight_tls_check(const pagid_config *c, const pagid_listen *l, FILE *err);

#endif

/*
 * check_apps.h - pagid -t loads the Perl apps (compile, modules, the code
 * reference) in a child process as the workers' user.
 */
#ifndef PAGID_CHECK_APPS_H
#define PAGID_CHECK_APPS_H

#include <stdio.h>

#include "common/config.h"

/**
 * Load c's Perl apps (if any) as a zygote would, in a child that switched to
 * the workers' user; each failure on err ("FILE:LINE: message" when Perl
 * names the place). Returns the number of errors (0 or 1).
 */
int check_apps_load(const pagid_config *c, FILE *err);

#endif

/*
 * module_abi.h - the module ABI policy (pagi(3), "Versioning"), shared by the
 * worker's loader and pagid -t, which reads a module's ABI from its ELF file
 * without running any of its code.
 */
#ifndef PAGID_MODULE_ABI_H
#define PAGID_MODULE_ABI_H

#include <stddef.h>

/* NULL when a module built against ABI v (pagi_app.abi_version) may run on
 * this server; else why not, written to err and returned. */
const char *module_abi_problem(int v, char *err, size_t errlen);

/* The abi_version of the pagi_module table in the ELF file at path: 0 and
 * *abi set, or -1 when it cannot be told (not a native ELF shared object, no
 * such symbol, unreadable): the loader then has the last word. */
int module_abi_read(const char *path, int *abi);

#endif

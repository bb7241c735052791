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

#define MODULE_RESERVED_PROBLEM                                                              \
    "has non-zero reserved members in its pagi_app table: they must be zero (see VERSIONING in " \
    "pagi(3); PAGI_APP_INIT or a designated initializer leaves them so)"

/* NULL when a loaded table's reserved members are all zero, else
 * MODULE_RESERVED_PROBLEM. */
const char *module_reserved_problem(const void *const reserved[], size_t n);

/* What pagid -t can tell of the pagi_module table in the ELF file at path. */
typedef struct module_table_info {
    int abi;          /* pagi_app.abi_version */
    int reserved_set; /* a reserved member holds a non-zero constant (a
                       * relocated pointer is only seen by the loader) */
} module_table_info;

/* Reads the table without running any code of the module: 0 and *info set;
 * -1 when it cannot be told (unreadable: the loader then has the last word,
 * or no PAGI_MODULE_SYMBOL: *why says so); -2 when the file is not a valid
 * module (empty, not ELF, another class, truncated or corrupt: *why says
 * which). *why is a static string to follow "app module PATH ". */
int module_abi_read(const char *path, module_table_info *info, const char **why);

#endif

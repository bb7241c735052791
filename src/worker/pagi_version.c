/*
 * pagi_version.c - the runtime version calls of pagi.h (new in ABI 2.1): what the
 * running server offers, for a module that wants to check or log it.
 */
#include <config.h> /* autoconf's: PACKAGE_VERSION */

#include <stdint.h>

#include "pagi/pagi.h"

unsigned pagi_abi_version(void)
{
    return PAGI_ABI_VERSION;
}

const char *pagi_server_version(void)
{
    return "pagid " PACKAGE_VERSION;
}

/* A minor must not change a public struct's size (pagi.h: later minors take
 * their fields from the reserved space). These catch one that does; the
 * numbers are those of ABI 2.0 on LP64. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(pagi_event) == 336, "sizeof(pagi_event) changed: an ABI break");
_Static_assert(sizeof(pagi_app) == 104, "sizeof(pagi_app) changed: an ABI break");
/* ABI 2.2's */
_Static_assert(sizeof(pagi_tls_info) == 112, "sizeof(pagi_tls_info) changed: an ABI break");
#endif

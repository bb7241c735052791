/*
 * perl_host.h - the Perl host's app table, used by the app registry for
 * `.pl` app specs when pagid is built with the Perl host.
 */
#ifndef PAGID_PERL_HOST_H
#define PAGID_PERL_HOST_H

#include "pagi/pagi.h"

extern const pagi_app app_perl;

#endif

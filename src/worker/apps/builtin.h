/*
 * builtin.h - the apps compiled into pagid.
 */
#ifndef PAGID_APPS_BUILTIN_H
#define PAGID_APPS_BUILTIN_H

#include <pagi/pagi.h>

extern const pagi_app app_hello;
extern const pagi_app app_echo;

#endif

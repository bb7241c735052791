/*
 * tls_ocsp.h - OCSP stapling from files: the DER response the operator's
 * job fetched for a certificate (openssl ocsp -respout, certbot, ...) is
 * checked when the listener's contexts are built and stapled to every
 * handshake that asks for one, for as long as it is valid.
 */
#ifndef PAGID_TLS_OCSP_H
#define PAGID_TLS_OCSP_H

#include <stdio.h>

#include "config.h"

struct ssl_ctx_st;

/**
 * Staple pc->ocsp for the certificate ctx has just loaded (its current
 * one). The response must be successful, signed by the certificate's
 * issuer (found in the chain of pc->cert) or a responder it delegated to,
 * and say "good" for that certificate; problems go to err at pc's ocsp
 * position, -1 then. One out of date is not stapled (0; pagid -t and the
 * start warn about it, preflight_tls.c). The responses live with ctx and are freed with it.
 */
int tls_ocsp_load(const pagid_config *c, struct ssl_ctx_st *ctx, const pagid_tls_cert *pc,
                  FILE *err);

#endif

/*-------------------------------------------------------------------------
 *
 * preauth.h
 *	  Counts of connections before authentication: one shared sum, which
 *	  only privileged readers see.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_PREAUTH_H
#define SSLR_PREAUTH_H

#include "sslr_types.h"

/* shared memory */
extern void sslr_preauth_shmem_request(void);
extern void sslr_preauth_shmem_startup(void);

/*
 * This backend's counting before authentication: field is an index into
 * SslrTally taken as an array.  Safe inside OpenSSL's callbacks.
 */
extern void sslr_preauth_count(int field, int64 amount);

/*
 * The connection is authenticated: what it counted so far stays in the
 * sum; from now on its slot counts (totals.c).  Returns whether the
 * connection itself is in the sum (it is once anything was counted).
 */
extern bool sslr_preauth_end(void);

/* The sum, with no lock; returns its connections. */
extern int64 sslr_preauth_read(SslrTally *tally);

#endif							/* SSLR_PREAUTH_H */

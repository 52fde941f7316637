/*-------------------------------------------------------------------------
 *
 * preauth.h
 *	  A connection's counts before authentication: kept where only
 *	  privileged readers see them until the connection authenticates or
 *	  ends.
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

/* The caller holds the extension's LWLock exclusively (totals.c). */
extern void sslr_preauth_hand_over(const SslrTally *own, SslrTally *baseline,
								   int64 *connection_baseline);
extern void sslr_preauth_release_gone(void);
extern void sslr_preauth_reset(void);

/* With no lock: whether sslr_preauth_release_gone has work. */
extern bool sslr_preauth_any_gone(void);

/* Under the lock (or alone, in the postmaster): the two sums. */
extern int64 sslr_preauth_read_released(SslrTally *tally);
extern int64 sslr_preauth_read_pending(SslrTally *tally);

#endif							/* SSLR_PREAUTH_H */

/*-------------------------------------------------------------------------
 *
 * totals.h
 *	  What the cluster has counted, across connections: their reading, reset
 *	  and keeping.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_TOTALS_H
#define SSLR_TOTALS_H

#include "datatype/timestamp.h"
#include "libpq/libpq-be.h"

#include "sslr_types.h"

/* Cluster totals, guarded by the extension's LWLock. */
typedef struct SslrTotals
{
	int64		connections;
	SslrTally	tally;
	TimestampTz stats_reset;
} SslrTotals;

extern void sslr_totals_shmem_request(void);
extern void sslr_totals_shmem_startup(void);
extern void sslr_totals_attach(Port *port);

/* for privileged readers only: see totals.c */
extern void sslr_totals_read(SslrTotals *totals);
extern void sslr_totals_reset(void);

/* for the statistics file, in the postmaster */
extern bool sslr_totals_to_keep(SslrTotals *totals);
extern void sslr_totals_restore(const SslrTotals *totals);

#endif							/* SSLR_TOTALS_H */

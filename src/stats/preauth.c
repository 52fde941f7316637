/*-------------------------------------------------------------------------
 *
 * preauth.c
 *	  Counts of connections before authentication, in one shared sum.
 *
 * Before authentication a backend may have no PGPROC (so no LWLock), and
 * it may leave by _exit() (startup packet timeout, SIGTERM during
 * start-up), which runs no exit callback: its counts must be in shared
 * memory from its first record on.  They go straight into one sum of
 * atomics, the connection itself at its first count.  Nobody but
 * privileged readers (pg_read_all_stats) reads that sum, so it needs no
 * hiding: the cluster totals are theirs alone (totals.c; docs/reference.md,
 * "Who sees what").
 *
 * At authentication the backend stops adding here (sslr_preauth_end) and
 * counts in its slot, which starts with the same counts: totals.c takes
 * them as the slot's baseline, so that each byte is in the totals once.
 *
 * Locking rules:
 *	- The sum is atomics, added to by any backend before authentication
 *	  with no lock (inside OpenSSL's callbacks: no LWLock, allocation or
 *	  ereport), and never decreased.  A reset (totals.c) reads it and
 *	  takes what it holds out of the totals.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "stats/preauth.h"

/* Counts: connections, then the tally's fields. */
#define SSLR_COUNTS (1 + (int) SSLR_TALLY_FIELDS)

typedef struct SslrPreauth
{
	pg_atomic_uint64 counts[SSLR_COUNTS];
} SslrPreauth;

static SslrPreauth *sslr_preauth = NULL;

/* Where this backend is: nothing counted yet, counting here, or done. */
typedef enum SslrPreauthMode
{
	SSLR_PREAUTH_NONE,
	SSLR_PREAUTH_COUNTING,
	SSLR_PREAUTH_DONE
} SslrPreauthMode;

static SslrPreauthMode sslr_mode = SSLR_PREAUTH_NONE;

void
sslr_preauth_shmem_request(void)
{
	RequestAddinShmemSpace(sizeof(SslrPreauth));
}

void
sslr_preauth_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_preauth = ShmemInitStruct("ssl_renegotiate preauth", sizeof(SslrPreauth), &found);
	if (!found)
		for (int c = 0; c < SSLR_COUNTS; c++)
			pg_atomic_init_u64(&sslr_preauth->counts[c], 0);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Count before authentication (field -1: the connection itself, counted
 * with the first count).  After authentication the slot counts alone.
 */
void
sslr_preauth_count(int field, int64 amount)
{
	if (sslr_mode == SSLR_PREAUTH_DONE || sslr_preauth == NULL)
		return;
	if (sslr_mode == SSLR_PREAUTH_NONE)
	{
		sslr_mode = SSLR_PREAUTH_COUNTING;
		pg_atomic_fetch_add_u64(&sslr_preauth->counts[0], 1);
	}
	pg_atomic_fetch_add_u64(&sslr_preauth->counts[field + 1], (uint64) amount);
}

bool
sslr_preauth_end(void)
{
	bool		counted = sslr_mode == SSLR_PREAUTH_COUNTING;

	sslr_mode = SSLR_PREAUTH_DONE;
	return counted;
}

int64
sslr_preauth_read(SslrTally *tally)
{
	int64		sums[SSLR_COUNTS] = {0};

	for (int c = 0; c < SSLR_COUNTS; c++)
		sums[c] = (int64) pg_atomic_read_u64(&sslr_preauth->counts[c]);
	memcpy(tally, &sums[1], sizeof(SslrTally));
	return sums[0];
}

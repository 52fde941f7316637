/*-------------------------------------------------------------------------
 *
 * totals.c
 *	  Cluster-wide totals: what every TLS connection since the last reset
 *	  has counted, live or gone.
 *
 * The totals are the sum of three parts, none of which ever decreases:
 *	- the connections that exited: at exit each folds its slot into the
 *	  totals here, less its baseline;
 *	- the early sums (slots.c): connections before authentication;
 *	- each live slot, less its baseline: the part of its counts that the
 *	  early sums hold already (the handshake), or that a reset zeroed.
 * So every byte is counted exactly once.
 *
 * Locking rules:
 *	- The totals and the baselines are guarded by the extension's LWLock
 *	  (sslr_slots_lock).  Attaching or detaching a slot happens under the
 *	  lock held exclusively, so a reader holding it shared sees every
 *	  connection's post-authentication counts exactly once: live in a slot
 *	  or folded into the totals.
 *	- A reset zeroes the totals less the early sums, and makes each live
 *	  slot's current counts its baseline.
 *
 * The postmaster keeps the totals across a clean restart (statsfile.c).
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "role_totals.h"
#include "slots.h"
#include "totals.h"

typedef struct SslrTotalsShared
{
	SslrTotals	totals;			/* exited backends, less the reset baseline */
	SslrTally	baseline[FLEXIBLE_ARRAY_MEMBER];	/* per slot: counted
													 * elsewhere already */
} SslrTotalsShared;

static SslrTotalsShared *sslr_totals = NULL;

/* The slot this backend attached to, or -1. */
static int	sslr_my_index = -1;

static void sslr_totals_detach(int code, Datum arg);

static Size
sslr_totals_shmem_size(void)
{
	return add_size(offsetof(SslrTotalsShared, baseline),
					mul_size(MaxBackends, sizeof(SslrTally)));
}

void
sslr_totals_shmem_request(void)
{
	RequestAddinShmemSpace(sslr_totals_shmem_size());
}

void
sslr_totals_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_totals = ShmemInitStruct("ssl_renegotiate totals", sslr_totals_shmem_size(), &found);
	if (!found)
	{
		memset(sslr_totals, 0, sslr_totals_shmem_size());
		sslr_totals->totals.stats_reset = GetCurrentTimestamp();
	}
	LWLockRelease(AddinShmemInitLock);
}

/* The totals of exited backends plus the early sums; under the lock or alone. */
static void
sslr_totals_with_early(SslrTotals *totals)
{
	SslrTally	early;

	*totals = sslr_totals->totals;
	totals->connections += sslr_read_early(&early);
	sslr_tally_add(&totals->tally, &early, 1);
}

/*
 * The connection is authenticated: take this backend's shared slot, with
 * what the handshake counted as its baseline, and fold it into the totals
 * at exit.
 */
void
sslr_totals_attach(Port *port)
{
	int			index;

	if (sslr_totals == NULL || !sslr_slots_ready() || sslr_slot_attached())
		return;
	index = sslr_backend_slot_index();

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_take_slot(index, port);
	sslr_totals->baseline[index] = sslr_my_slot->stats.tally;
	sslr_my_index = index;
	LWLockRelease(sslr_slots_lock());

	before_shmem_exit(sslr_totals_detach, (Datum) 0);
}

/*
 * At backend exit: fold the slot into the totals, and into its database
 * and role's (role_totals.c) in the same step, and free it.
 */
static void
sslr_totals_detach(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	SslrTally  *baseline;

	if (sslr_my_index < 0 || !sslr_slot_attached())
		return;
	baseline = &sslr_totals->baseline[sslr_my_index];

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_tally_add(&sslr_totals->totals.tally, &sslr_my_slot->stats.tally, 1);
	sslr_tally_add(&sslr_totals->totals.tally, baseline, -1);
	memset(baseline, 0, sizeof(*baseline));
	sslr_role_totals_fold(sslr_my_index, &sslr_my_slot->stats.tally);
	sslr_free_slot();
	sslr_my_index = -1;
	LWLockRelease(sslr_slots_lock());
}

/* What a live backend has counted since attaching (or the last reset). */
typedef struct SslrLiveTally
{
	Oid			userid;
	SslrTally	tally;
} SslrLiveTally;

/*
 * Totals since the last reset: exited backends, connections before
 * authentication, and the live backends for which include(userid) says
 * yes.  The slots are copied under the lock and judged after it is
 * released, so that include may do catalog lookups.
 */
void
sslr_read_totals(SslrTotals *totals, bool (*include) (Oid userid))
{
	SslrLiveTally *live = palloc(sizeof(SslrLiveTally) * sslr_slot_count());
	int			nlive = 0;
	SslrSlot	copy;

	LWLockAcquire(sslr_slots_lock(), LW_SHARED);
	sslr_totals_with_early(totals);
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		live[nlive].userid = copy.userid;
		live[nlive].tally = copy.stats.tally;
		sslr_tally_add(&live[nlive].tally, &sslr_totals->baseline[i], -1);
		nlive++;
	}
	LWLockRelease(sslr_slots_lock());

	for (int i = 0; i < nlive; i++)
		if (include(live[i].userid))
			sslr_tally_add(&totals->tally, &live[i].tally, 1);
	pfree(live);
}

/*
 * Zero the totals.  Live backends keep their own counters (only they may
 * write them), so their current counts become their baselines; the early
 * sums become a negative part of the totals.
 */
void
sslr_reset_totals(void)
{
	SslrSlot	copy;
	SslrTally	early;
	SslrTotals *totals = &sslr_totals->totals;

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	memset(totals, 0, sizeof(SslrTotals));
	totals->connections -= sslr_read_early(&early);
	sslr_tally_add(&totals->tally, &early, -1);
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		sslr_totals->baseline[i] = copy.stats.tally;
	}
	totals->stats_reset = GetCurrentTimestamp();
	LWLockRelease(sslr_slots_lock());
}

/*
 * At postmaster exit, when no backend is left (so without the lock, which
 * the postmaster may not take): the totals to keep, the early sums
 * included.  Returns false if there is no shared memory.
 */
bool
sslr_totals_to_keep(SslrTotals *totals)
{
	if (sslr_totals == NULL || !sslr_slots_ready())
		return false;
	sslr_totals_with_early(totals);
	return true;
}

/* When the postmaster creates shared memory: the totals kept last time. */
void
sslr_totals_restore(const SslrTotals *totals)
{
	sslr_totals->totals = *totals;
}

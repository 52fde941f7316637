/*-------------------------------------------------------------------------
 *
 * totals.c
 *	  Cluster-wide totals: what every TLS connection since the last reset
 *	  has counted, live or gone.
 *
 * The totals are the sum of four parts, none of which ever decreases:
 *	- the connections that exited: at exit each folds its slot into the
 *	  totals here, less its baseline;
 *	- the released sums (preauth.c): connections that ended before
 *	  authentication;
 *	- each live slot, less its baseline: the part of its counts that a
 *	  reset zeroed (or, rarely, that the released sums hold already);
 *	- the buffers of connections not yet authenticated (preauth.c), less
 *	  their reset baselines.
 * So every byte is counted exactly once.  A connection counts once too:
 * in its buffer, then its slot (a baseline of 1 if it connected before a
 * reset), then at its exit.
 *
 * Who sees what (README, "Who sees what"): every reader gets the first two
 * parts; a live slot only if include(its role) says yes, and the buffers
 * only if include(InvalidOid) does (pg_read_all_stats: a connection has no
 * role yet).  A login's records before authentication are thus never
 * shown to another role one by one: they join its session at
 * authentication, as the buffer is handed over to the slot in the same
 * step, and everyone's totals at its end.
 *
 * Locking rules:
 *	- The totals and the baselines are guarded by the extension's LWLock
 *	  (sslr_slots_lock).  Attaching or detaching a slot happens under the
 *	  lock held exclusively, so a reader holding it shared sees every
 *	  connection's post-authentication counts exactly once: live in a slot
 *	  or folded into the totals.
 *	- A reset zeroes the totals less the released sums, and makes each
 *	  live slot's and each buffer's current counts its baseline.
 *	- Before reading, buffers whose owners are gone are released, under
 *	  the lock held exclusively (preauth.c).
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

#include "preauth.h"
#include "role_totals.h"
#include "slots.h"
#include "totals.h"

/* Per slot: what it holds that is counted elsewhere, or before a reset. */
typedef struct SslrBaseline
{
	SslrTally	tally;
	int64		connection;		/* 1 if the connection is, 0 otherwise */
} SslrBaseline;

typedef struct SslrTotalsShared
{
	SslrTotals	totals;			/* exited backends, less the reset baseline */
	SslrBaseline baseline[FLEXIBLE_ARRAY_MEMBER];
} SslrTotalsShared;

static SslrTotalsShared *sslr_totals = NULL;

/* The slot this backend attached to, or -1. */
static int	sslr_my_index = -1;

static void sslr_totals_detach(int code, Datum arg);

static Size
sslr_totals_shmem_size(void)
{
	return add_size(offsetof(SslrTotalsShared, baseline),
					mul_size(MaxBackends, sizeof(SslrBaseline)));
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

/*
 * The totals of exited backends plus the released sums; under the lock or
 * alone.
 */
static void
sslr_totals_with_released(SslrTotals *totals)
{
	SslrTally	released;

	*totals = sslr_totals->totals;
	totals->connections += sslr_preauth_read_released(&released);
	sslr_tally_add(&totals->tally, &released, 1);
}

/*
 * The connection is authenticated: take this backend's shared slot, with
 * what the handshake counted, and its buffer's counts with it in the same
 * step; fold it into the totals at exit.
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
	sslr_preauth_hand_over(&sslr_my_slot->stats.tally,
						   &sslr_totals->baseline[index].tally,
						   &sslr_totals->baseline[index].connection);
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
	SslrBaseline *baseline;

	if (sslr_my_index < 0 || !sslr_slot_attached())
		return;
	baseline = &sslr_totals->baseline[sslr_my_index];

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_totals->totals.connections += 1 - baseline->connection;
	sslr_tally_add(&sslr_totals->totals.tally, &sslr_my_slot->stats.tally, 1);
	sslr_tally_add(&sslr_totals->totals.tally, &baseline->tally, -1);
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
	int64		connection;
	SslrTally	tally;
} SslrLiveTally;

/*
 * Totals since the last reset: exited backends, connections that ended
 * before authentication, and what include says this reader may see of the
 * rest: the live backends for which include(userid) says yes, connections
 * before authentication if include(InvalidOid) does.  The slots are copied
 * under the lock and judged after it is released, so that include may do
 * catalog lookups.
 */
void
sslr_read_totals(SslrTotals *totals, bool (*include) (Oid userid))
{
	SslrLiveTally *live = palloc(sizeof(SslrLiveTally) * (sslr_slot_count() + 1));
	int			nlive = 0;
	SslrSlot	copy;

	if (sslr_preauth_any_gone())
	{
		LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
		sslr_preauth_release_gone();
		LWLockRelease(sslr_slots_lock());
	}

	LWLockAcquire(sslr_slots_lock(), LW_SHARED);
	sslr_totals_with_released(totals);
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		live[nlive].userid = copy.userid;
		live[nlive].connection = 1 - sslr_totals->baseline[i].connection;
		live[nlive].tally = copy.stats.tally;
		sslr_tally_add(&live[nlive].tally, &sslr_totals->baseline[i].tally, -1);
		nlive++;
	}
	/* not yet authenticated: no role */
	live[nlive].userid = InvalidOid;
	live[nlive].connection = sslr_preauth_read_pending(&live[nlive].tally);
	nlive++;
	LWLockRelease(sslr_slots_lock());

	for (int i = 0; i < nlive; i++)
		if (include(live[i].userid))
		{
			totals->connections += live[i].connection;
			sslr_tally_add(&totals->tally, &live[i].tally, 1);
		}
	pfree(live);
}

/*
 * Zero the totals.  Live backends keep their own counters (only they may
 * write them), so their current counts become their baselines, and so do
 * the buffers' (preauth.c); the released sums become a negative part of
 * the totals.
 */
void
sslr_reset_totals(void)
{
	SslrSlot	copy;
	SslrTally	released;
	SslrTotals *totals = &sslr_totals->totals;

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	memset(totals, 0, sizeof(SslrTotals));
	totals->connections -= sslr_preauth_read_released(&released);
	sslr_tally_add(&totals->tally, &released, -1);
	sslr_preauth_reset();
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		sslr_totals->baseline[i].tally = copy.stats.tally;
		sslr_totals->baseline[i].connection = 1;
	}
	totals->stats_reset = GetCurrentTimestamp();
	LWLockRelease(sslr_slots_lock());
}

/*
 * At postmaster exit, when no backend is left (so without the lock, which
 * the postmaster may not take): the totals to keep, with every buffer's
 * counts, as their owners are gone.  Returns false if there is no shared
 * memory.
 */
bool
sslr_totals_to_keep(SslrTotals *totals)
{
	SslrTally	pending;

	if (sslr_totals == NULL || !sslr_slots_ready())
		return false;
	sslr_totals_with_released(totals);
	totals->connections += sslr_preauth_read_pending(&pending);
	sslr_tally_add(&totals->tally, &pending, 1);
	return true;
}

/* When the postmaster creates shared memory: the totals kept last time. */
void
sslr_totals_restore(const SslrTotals *totals)
{
	sslr_totals->totals = *totals;
}

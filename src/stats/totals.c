/*-------------------------------------------------------------------------
 *
 * totals.c
 *	  Cluster-wide totals: what every TLS connection since the last reset
 *	  has counted, live or gone.
 *
 * The totals are the sum of three parts, none of which ever decreases:
 *	- the connections that exited: at exit each folds its slot into the
 *	  totals here, less its baseline;
 *	- the sum of connections before authentication (preauth.c): their
 *	  handshakes and startup packets, those that never authenticated
 *	  included;
 *	- each live slot, less its baseline: the part of its counts that the
 *	  sum of preauth.c holds already (its handshake), or that a reset
 *	  zeroed.
 * So every byte is counted exactly once.  A connection counts once too:
 * in the sum at its first record (a baseline of 1 in its slot), or, after
 * a reset, at its exit.  A reset takes what the sum holds then out of the
 * totals, and makes each live slot's counts its baseline.
 *
 * Who sees what (docs/reference.md, "Who sees what"): the totals are other
 * roles' traffic summed, and a sum small enough to isolate one session is
 * that session's traffic, so only pg_read_all_stats reads them
 * (sql_api.c); it sees everything.
 *
 * Locking rules:
 *	- The totals and the baselines are written under the extension's
 *	  LWLock (sslr_slots_lock) held exclusively, by a login taking its
 *	  slot, an exit folding and freeing it, and a reset; each such change
 *	  is a "move" (slots.c: sslr_slots_moves_begin, sslr_slots_moves_end).
 *	- Readers take no lock: they copy the totals, the sum and every live
 *	  slot's counters less its baseline, and copy again if a move
 *	  overlapped (sslr_slots_moves_read_retry); so they see each connection's
 *	  counts exactly once, live in a slot or folded into the totals, and
 *	  neither wait for a backend's records nor make a login or an exit
 *	  wait.
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

#include "stats/preauth.h"
#include "stats/role_totals.h"
#include "stats/slots.h"
#include "stats/totals.h"

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

/* The totals of exited backends plus the sum before authentication. */
static void
sslr_totals_with_preauth(SslrTotals *totals)
{
	SslrTally	preauth;

	*totals = sslr_totals->totals;
	totals->connections += sslr_preauth_read(&preauth);
	sslr_tally_add(&totals->tally, &preauth, 1);
}

/*
 * The connection is authenticated: take this backend's shared slot, with
 * what the handshake counted, which the sum before authentication holds
 * already (its baseline); fold it into the totals at exit.
 */
void
sslr_totals_attach(Port *port)
{
	int			index;
	bool		in_preauth;

	if (sslr_totals == NULL || !sslr_slots_ready() || sslr_slot_attached())
		return;
	index = sslr_slots_backend_index();
	in_preauth = sslr_preauth_end();

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_slots_moves_begin();
	sslr_slot_take(index, port);
	if (in_preauth)
	{
		sslr_totals->baseline[index].tally = sslr_my_slot->stats.tally;
		sslr_totals->baseline[index].connection = 1;
	}
	else
		memset(&sslr_totals->baseline[index], 0, sizeof(SslrBaseline));
	sslr_slots_moves_end();
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
	sslr_slots_moves_begin();
	sslr_totals->totals.connections += 1 - baseline->connection;
	sslr_tally_add(&sslr_totals->totals.tally, &sslr_my_slot->stats.tally, 1);
	sslr_tally_add(&sslr_totals->totals.tally, &baseline->tally, -1);
	memset(baseline, 0, sizeof(*baseline));
	sslr_role_totals_fold(sslr_my_index, &sslr_my_slot->stats.tally);
	sslr_slot_free();
	sslr_slots_moves_end();
	sslr_my_index = -1;
	LWLockRelease(sslr_slots_lock());
}

/*
 * Totals since the last reset: exited backends, connections before
 * authentication, and the live backends.  For privileged readers only
 * (sql_api.c).  Takes no lock: see the file header.
 */
void
sslr_totals_read(SslrTotals *totals)
{
	SslrSlotTally copy;

	for (;;)
	{
		uint32		seen = sslr_slots_moves_read_begin();

		sslr_totals_with_preauth(totals);
		for (int i = 0; i < sslr_slot_count(); i++)
		{
			sslr_slots_read_tally(i, &copy);
			if (copy.pid == 0)
				continue;
			totals->connections += 1 - sslr_totals->baseline[i].connection;
			sslr_tally_add(&totals->tally, &copy.tally, 1);
			sslr_tally_add(&totals->tally, &sslr_totals->baseline[i].tally, -1);
		}
		if (!sslr_slots_moves_read_retry(seen))
			break;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Zero the totals.  Live backends keep their own counters (only they may
 * write them), so their current counts become their baselines; what the
 * sum before authentication holds becomes a negative part of the totals.
 */
void
sslr_totals_reset(void)
{
	SslrSlotTally copy;
	SslrTally	preauth;
	SslrTotals *totals = &sslr_totals->totals;

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_slots_moves_begin();
	memset(totals, 0, sizeof(SslrTotals));
	totals->connections -= sslr_preauth_read(&preauth);
	sslr_tally_add(&totals->tally, &preauth, -1);
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		sslr_slots_read_tally(i, &copy);
		if (copy.pid == 0)
			continue;
		sslr_totals->baseline[i].tally = copy.tally;
		sslr_totals->baseline[i].connection = 1;
	}
	totals->stats_reset = GetCurrentTimestamp();
	sslr_slots_moves_end();
	LWLockRelease(sslr_slots_lock());
}

/*
 * At postmaster exit, when no backend is left (so without the lock, which
 * the postmaster may not take): the totals to keep.  Returns false if
 * there is no shared memory.
 */
bool
sslr_totals_to_keep(SslrTotals *totals)
{
	if (sslr_totals == NULL || !sslr_slots_ready())
		return false;
	sslr_totals_with_preauth(totals);
	return true;
}

/* When the postmaster creates shared memory: the totals kept last time. */
void
sslr_totals_restore(const SslrTotals *totals)
{
	sslr_totals->totals = *totals;
}

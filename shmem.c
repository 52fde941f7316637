/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Per-backend slots and cluster totals in shared memory.
 *
 * There is one slot per possible backend (MaxBackends), indexed by
 * MyBackendId - 1, so walsenders have slots too.
 *
 * Locking rules:
 *	- A slot is written only by the backend that owns it, with no lock: the
 *	  owner bumps changecount before and after each write (odd means "write
 *	  in progress"), and readers copy the slot and retry until they saw the
 *	  same even changecount on both sides of the copy.  The owner is never
 *	  blocked by a reader.
 *	- The totals are guarded by the extension's LWLock.  Attaching or
 *	  detaching a slot (pid set or cleared) also happens under the lock held
 *	  exclusively, so a reader holding it shared sees every connection
 *	  exactly once: either live in a slot or folded into the totals.
 *	- Backends that never took a slot (handshake failed, login rejected
 *	  before authentication ran) add their counts at exit with atomics: they
 *	  may have no PGPROC, so no LWLock.
 *	- The totals hold the exited backends' sums minus a baseline taken at
 *	  reset from the then-live backends and the unattached sums, so that
 *	  "totals = folded + unattached + live" counts everything since the
 *	  last reset.
 *
 * Before a backend's connection reaches authentication (the TLS handshake)
 * it counts into a backend-local slot; attaching copies those counts into
 * the shared slot.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "ssl_renegotiate.h"

/*
 * Connections that ended before taking a slot (TLS handshake failed, login
 * rejected before authentication ran): added with atomics, because such a
 * backend may have no PGPROC and so cannot take the LWLock.
 */
typedef struct SslrUnattached
{
	pg_atomic_uint64 connections;
	pg_atomic_uint64 tally[SSLR_TALLY_FIELDS];
} SslrUnattached;

typedef struct SslrShared
{
	LWLock	   *lock;
	SslrTotals	totals;
	SslrUnattached unattached;
	SslrSlot	slots[FLEXIBLE_ARRAY_MEMBER];
} SslrShared;

static SslrShared *sslr_shared = NULL;

/* Counts of the handshake, and of the time after detaching. */
static SslrSlot sslr_local_slot;
static bool sslr_attached_once = false;

SslrSlot   *sslr_my_slot = &sslr_local_slot;

static void sslr_detach_slot(int code, Datum arg);
static void sslr_count_unattached(int code, Datum arg);

StaticAssertDecl(sizeof(SslrTally) % sizeof(int64) == 0,
				 "SslrTally must consist of int64 members only");

Size
sslr_shmem_size(void)
{
	return add_size(offsetof(SslrShared, slots),
					mul_size(MaxBackends, sizeof(SslrSlot)));
}

void
sslr_shmem_request(void)
{
	RequestAddinShmemSpace(sslr_shmem_size());
	RequestNamedLWLockTranche("ssl_renegotiate", 1);
}

void
sslr_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_shared = ShmemInitStruct("ssl_renegotiate", sslr_shmem_size(), &found);
	if (!found)
	{
		memset(sslr_shared, 0, sslr_shmem_size());
		sslr_shared->lock = &(GetNamedLWLockTranche("ssl_renegotiate"))->lock;
		pg_atomic_init_u64(&sslr_shared->unattached.connections, 0);
		for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
			pg_atomic_init_u64(&sslr_shared->unattached.tally[i], 0);
		sslr_shared->totals.stats_reset = GetCurrentTimestamp();
	}
	LWLockRelease(AddinShmemInitLock);
}

bool
sslr_shmem_ready(void)
{
	return sslr_shared != NULL;
}

int
sslr_slot_count(void)
{
	return MaxBackends;
}

void
sslr_tally_add(SslrTally *dst, const SslrTally *src, int sign)
{
	int64	   *d = (int64 *) dst;
	const int64 *s = (const int64 *) src;

	for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
		d[i] += sign * s[i];
}

/*
 * Take this backend's shared slot, carrying over what the handshake
 * counted, and arrange for its counts to reach the totals at exit.
 */
void
sslr_attach_slot(Port *port)
{
	SslrSlot   *slot;
	int			index = SSLR_MY_BACKEND_INDEX;

	if (sslr_shared == NULL || sslr_my_slot != &sslr_local_slot)
		return;
	if (index < 0 || index >= MaxBackends)
		elog(ERROR, "ssl_renegotiate: backend index %d out of range", index);

	slot = &sslr_shared->slots[index];

	LWLockAcquire(sslr_shared->lock, LW_EXCLUSIVE);
	SSLR_BEGIN_WRITE(slot);
	slot->pid = MyProcPid;
	slot->userid = InvalidOid;	/* not known yet: see sslr_publish_userid */
	slot->is_walsender = am_walsender;
	strlcpy(slot->version, SSL_get_version(port->ssl), sizeof(slot->version));
	strlcpy(slot->cipher, SSL_get_cipher_name(port->ssl), sizeof(slot->cipher));
	slot->stats = sslr_local_slot.stats;
	sslr_my_slot = slot;
	sslr_attached_once = true;
	SSLR_END_WRITE(slot);
	LWLockRelease(sslr_shared->lock);

	before_shmem_exit(sslr_detach_slot, (Datum) 0);
}

/*
 * The session user is set after authentication; rekey.c calls this from
 * the next safe points until it is known.  Returns true once published.
 */
bool
sslr_publish_userid(void)
{
	SslrSlot   *slot = sslr_my_slot;

	if (slot == &sslr_local_slot || OidIsValid(slot->userid))
		return true;
	if (MyProc == NULL || !OidIsValid(MyProc->roleId))
		return false;
	SSLR_BEGIN_WRITE(slot);
	slot->userid = MyProc->roleId;
	SSLR_END_WRITE(slot);
	return true;
}

/*
 * At backend exit: fold the slot into the totals and free it.  Anything the
 * connection still carries afterwards (the closing alert) is counted
 * locally only.
 */
static void
sslr_detach_slot(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	SslrSlot   *slot = sslr_my_slot;

	if (slot == &sslr_local_slot)
		return;

	sslr_rekey_at_exit();

	LWLockAcquire(sslr_shared->lock, LW_EXCLUSIVE);
	sslr_tally_add(&sslr_shared->totals.tally, &slot->stats.tally, 1);
	sslr_shared->totals.connections++;
	sslr_local_slot = *slot;
	sslr_my_slot = &sslr_local_slot;
	SSLR_BEGIN_WRITE(slot);
	slot->pid = 0;
	SSLR_END_WRITE(slot);
	LWLockRelease(sslr_shared->lock);
}

/*
 * A TLS handshake began in this backend: make sure its counts reach the
 * totals even if it never gets to authentication.
 */
void
sslr_connection_started(void)
{
	static bool registered = false;

	if (registered || sslr_shared == NULL)
		return;
	registered = true;

	/*
	 * Not before_shmem_exit: this may run before InitProcess, which insists
	 * that no shared-memory exit callback exists yet.  on_proc_exit runs
	 * later, with the (inherited) mapping of shared memory still in place.
	 */
	on_proc_exit(sslr_count_unattached, (Datum) 0);
}

/*
 * At exit of a backend that never attached a slot (an attached one was
 * folded by sslr_detach_slot, a before_shmem_exit callback, so earlier).
 */
static void
sslr_count_unattached(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	const int64 *t = (const int64 *) &sslr_local_slot.stats.tally;

	if (sslr_attached_once)
		return;
	for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
		pg_atomic_fetch_add_u64(&sslr_shared->unattached.tally[i], (uint64) t[i]);
	pg_atomic_fetch_add_u64(&sslr_shared->unattached.connections, 1);
}

/* The unattached connections' sums, as a tally. */
static int64
sslr_read_unattached(SslrTally *tally)
{
	int64	   *t = (int64 *) tally;

	for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
		t[i] = (int64) pg_atomic_read_u64(&sslr_shared->unattached.tally[i]);
	return (int64) pg_atomic_read_u64(&sslr_shared->unattached.connections);
}

/*
 * Copy a slot consistently: retry until the copy was not overlapped by a
 * write of its owner.
 */
void
sslr_read_slot(int index, SslrSlot *copy)
{
	volatile SslrSlot *slot = &sslr_shared->slots[index];

	for (;;)
	{
		int			before = slot->changecount;
		int			after;

		pg_read_barrier();
		memcpy(copy, (const SslrSlot *) slot, sizeof(SslrSlot));
		pg_read_barrier();
		after = slot->changecount;

		if (before == after && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
}

/* Totals since the last reset: exited backends plus live ones. */
void
sslr_read_totals(SslrTotals *totals)
{
	SslrSlot	copy;

	SslrTally	unattached;

	LWLockAcquire(sslr_shared->lock, LW_SHARED);
	*totals = sslr_shared->totals;
	totals->connections += sslr_read_unattached(&unattached);
	sslr_tally_add(&totals->tally, &unattached, 1);
	for (int i = 0; i < MaxBackends; i++)
	{
		if (sslr_shared->slots[i].pid == 0)
			continue;
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		sslr_tally_add(&totals->tally, &copy.stats.tally, 1);
		totals->connections++;
	}
	LWLockRelease(sslr_shared->lock);
}

/*
 * Zero the totals.  Live backends keep their own counters (only they may
 * write them), so their current counts become a negative baseline.
 */
void
sslr_reset_totals(void)
{
	SslrSlot	copy;
	SslrTally	unattached;
	SslrTotals *totals = &sslr_shared->totals;

	LWLockAcquire(sslr_shared->lock, LW_EXCLUSIVE);
	memset(totals, 0, sizeof(SslrTotals));
	totals->connections -= sslr_read_unattached(&unattached);
	sslr_tally_add(&totals->tally, &unattached, -1);
	for (int i = 0; i < MaxBackends; i++)
	{
		if (sslr_shared->slots[i].pid == 0)
			continue;
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		sslr_tally_add(&totals->tally, &copy.stats.tally, -1);
		totals->connections--;
	}
	totals->stats_reset = GetCurrentTimestamp();
	LWLockRelease(sslr_shared->lock);
}

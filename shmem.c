/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  Per-backend slots and cluster totals in shared memory.
 *
 * There is one slot per possible backend (MaxBackends), indexed by the
 * backend's number, so walsenders have slots too.
 *
 * Where a connection's counts live:
 *	- Before authentication (the TLS handshake, the startup packet) a
 *	  backend counts into a backend-local slot *and*, with atomics, straight
 *	  into the shared "early" sums: such a backend may have no PGPROC (so no
 *	  LWLock), and it may leave by _exit() (startup packet timeout, SIGTERM
 *	  during start-up), which runs no exit callback.  The connection itself
 *	  is counted there at its first record.
 *	- From authentication on it counts into its shared slot.  Attaching
 *	  copies the local counts into the slot and records them as the slot's
 *	  baseline: that part is in the early sums already.
 *	- At exit the slot's counts less its baseline are folded into the
 *	  totals; later traffic (the closing alert) is counted locally only.
 * So "totals + early sums + each live slot less its baseline" counts every
 * byte exactly once, and none of the three ever decreases.
 *
 * Locking rules:
 *	- A slot is written only by the backend that owns it, with no lock: the
 *	  owner bumps changecount before and after each write (odd means "write
 *	  in progress"), and readers copy the slot and retry until they saw the
 *	  same even changecount on both sides of the copy.  The owner is never
 *	  blocked by a reader.
 *	- The totals and the baselines are guarded by the extension's LWLock.
 *	  Attaching or detaching a slot (pid set or cleared) happens under the
 *	  lock held exclusively, so a reader holding it shared sees every
 *	  connection's post-authentication counts exactly once: live in a slot
 *	  or folded into the totals.
 *	- The early sums are atomics, added to without any lock.
 *	- A reset zeroes the totals less the early sums, and makes each live
 *	  slot's current counts its baseline.
 *	- Operator requests (ssl_renegotiate_rekey) are counted by the
 *	  requesters in an atomic beside the slot, under the lock held shared,
 *	  so that a request always reaches the backend that was asked.
 *
 * The totals survive a clean restart: the postmaster writes them to a file
 * of ours under pg_stat/ when it exits after a shutdown checkpoint, and
 * reads and removes that file when it creates shared memory, so that after
 * a crash (or an immediate stop) they start again from zero.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog_internal.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "port/pg_crc32c.h"
#include "replication/walsender.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "ssl_renegotiate.h"

/* Counts of connections before authentication: see the file header. */
typedef struct SslrEarly
{
	pg_atomic_uint64 connections;
	pg_atomic_uint64 tally[SSLR_TALLY_FIELDS];
} SslrEarly;

typedef struct SslrEntry
{
	SslrSlot	slot;			/* written by its owner only */
	SslrTally	baseline;		/* under the lock: counted elsewhere already */
	pg_atomic_uint64 requests;	/* operator requests, added under the lock */
} SslrEntry;

typedef struct SslrShared
{
	LWLock	   *lock;
	SslrTotals	totals;			/* exited backends, less the reset baseline */
	SslrEarly	early;
	SslrEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} SslrShared;

static SslrShared *sslr_shared = NULL;

/* Counts of the handshake, and of the time after detaching. */
static SslrSlot sslr_local_slot;
static SslrEntry *sslr_my_entry = NULL;

/* Still before authentication: counts go to the early sums too. */
static bool sslr_early = true;
static bool sslr_early_connection_counted = false;

SslrSlot   *sslr_my_slot = &sslr_local_slot;

/* No requests reach a backend before it attaches. */
static pg_atomic_uint64 sslr_no_requests;
pg_atomic_uint64 *sslr_my_requests = &sslr_no_requests;

static void sslr_detach_slot(int code, Datum arg);
static void sslr_load_totals(SslrTotals *totals);
static void sslr_shmem_shutdown(int code, Datum arg);

StaticAssertDecl(sizeof(SslrTally) % sizeof(int64) == 0,
				 "SslrTally must consist of int64 members only");

Size
sslr_shmem_size(void)
{
	return add_size(offsetof(SslrShared, entries),
					mul_size(MaxBackends, sizeof(SslrEntry)));
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

	pg_atomic_init_u64(&sslr_no_requests, 0);

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_shared = ShmemInitStruct("ssl_renegotiate", sslr_shmem_size(), &found);
	if (!found)
	{
		memset(sslr_shared, 0, sslr_shmem_size());
		sslr_shared->lock = &(GetNamedLWLockTranche("ssl_renegotiate"))->lock;
		pg_atomic_init_u64(&sslr_shared->early.connections, 0);
		for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
			pg_atomic_init_u64(&sslr_shared->early.tally[i], 0);
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u64(&sslr_shared->entries[i].requests, 0);
		sslr_shared->totals.stats_reset = GetCurrentTimestamp();
	}
	LWLockRelease(AddinShmemInitLock);

	/* the postmaster keeps the totals across a clean restart */
	if (!IsUnderPostmaster)
	{
		sslr_load_totals(&sslr_shared->totals);
		on_shmem_exit(sslr_shmem_shutdown, (Datum) 0);
	}
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

/* Index of a member of this backend's tally, as in SslrEarly.tally. */
static inline int
sslr_tally_field(const int64 *member)
{
	const int64 *first = (const int64 *) &sslr_my_slot->stats.tally;

	Assert(member >= first && member < first + SSLR_TALLY_FIELDS);
	return (int) (member - first);
}

/*
 * One record before authentication, already counted in the local slot:
 * add it to the early sums, and count the connection at its first record.
 */
void
sslr_count_early_record(SslrDirection dir, int64 wire_bytes)
{
	SslrEarly  *early;

	if (sslr_shared == NULL || !sslr_early)
		return;
	early = &sslr_shared->early;
	if (!sslr_early_connection_counted)
	{
		sslr_early_connection_counted = true;
		pg_atomic_fetch_add_u64(&early->connections, 1);
	}
	pg_atomic_fetch_add_u64(&early->tally[sslr_tally_field(&sslr_local_slot.stats.tally.bytes[dir])],
							(uint64) wire_bytes);
	pg_atomic_fetch_add_u64(&early->tally[sslr_tally_field(&sslr_local_slot.stats.tally.records[dir])], 1);
}

/*
 * Add to one of this backend's tally counters (a member of
 * sslr_my_slot->stats.tally); before authentication to the early sums too.
 */
void
sslr_count(int64 *counter, int64 amount)
{
	SslrSlot   *slot = sslr_my_slot;
	int			field = sslr_tally_field(counter);

	SSLR_BEGIN_WRITE(slot);
	*counter += amount;
	SSLR_END_WRITE(slot);

	if (sslr_early && sslr_shared != NULL)
		pg_atomic_fetch_add_u64(&sslr_shared->early.tally[field], (uint64) amount);
}

/*
 * Take this backend's shared slot, carrying over what the handshake
 * counted, and arrange for its counts to reach the totals at exit.
 */
void
sslr_attach_slot(Port *port)
{
	SslrEntry  *entry;
	int			index = SSLR_MY_BACKEND_INDEX;

	if (sslr_shared == NULL || sslr_my_entry != NULL)
		return;
	if (index < 0 || index >= MaxBackends)
		elog(ERROR, "ssl_renegotiate: backend index %d out of range", index);

	entry = &sslr_shared->entries[index];

	LWLockAcquire(sslr_shared->lock, LW_EXCLUSIVE);
	SSLR_BEGIN_WRITE(&entry->slot);
	entry->slot.pid = MyProcPid;
	entry->slot.userid = InvalidOid;	/* not known yet: see sslr_publish_userid */
	entry->slot.is_walsender = am_walsender;
	strlcpy(entry->slot.version, SSL_get_version(port->ssl), sizeof(entry->slot.version));
	strlcpy(entry->slot.cipher, SSL_get_cipher_name(port->ssl), sizeof(entry->slot.cipher));
	entry->slot.stats = sslr_local_slot.stats;
	entry->slot.stats.requests_seen = 0;
	SSLR_END_WRITE(&entry->slot);
	entry->baseline = sslr_local_slot.stats.tally;
	pg_atomic_write_u64(&entry->requests, 0);
	sslr_my_entry = entry;
	sslr_my_slot = &entry->slot;
	sslr_my_requests = &entry->requests;
	sslr_early = false;
	LWLockRelease(sslr_shared->lock);

	before_shmem_exit(sslr_detach_slot, (Datum) 0);
}

/*
 * The session user is set after authentication; policy.c calls this from
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
 * The protocol version and cipher in force, after a renegotiation changed
 * them.  Only string copies: this runs inside OpenSSL's callbacks.
 */
void
sslr_publish_cipher(SSL *ssl)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	strlcpy(slot->version, SSL_get_version(ssl), sizeof(slot->version));
	strlcpy(slot->cipher, SSL_get_cipher_name(ssl), sizeof(slot->cipher));
	SSLR_END_WRITE(slot);
}

/* Whether a rotation we asked the peer for is still unanswered. */
void
sslr_publish_rekey_pending(bool pending)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.rekey_pending = pending;
	SSLR_END_WRITE(slot);
}

void
sslr_publish_record_limit(int64 record_limit)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.record_limit = record_limit;
	SSLR_END_WRITE(slot);
}

/* Operator requests picked up, and whether one is still being carried out. */
void
sslr_publish_request(int64 seen, bool pending)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.requests_seen = seen;
	slot->stats.request_pending = pending;
	SSLR_END_WRITE(slot);
}

/*
 * Ask the TLS backend with this pid to rotate its keys.  Under the lock
 * held shared, so that the slot cannot change hands meanwhile: a request
 * reaches the backend that was asked, never the next owner of its slot.
 * Returns false if no attached TLS backend has this pid.
 */
bool
sslr_request_rekey(int pid)
{
	bool		found = false;

	LWLockAcquire(sslr_shared->lock, LW_SHARED);
	for (int i = 0; i < MaxBackends && !found; i++)
	{
		SslrEntry  *entry = &sslr_shared->entries[i];

		if (entry->slot.pid != pid)
			continue;
		pg_atomic_fetch_add_u64(&entry->requests, 1);
		found = true;
	}
	LWLockRelease(sslr_shared->lock);
	return found;
}

/* Requests made of the backend in slot index so far. */
int64
sslr_read_requests(int index)
{
	return (int64) pg_atomic_read_u64(&sslr_shared->entries[index].requests);
}

/*
 * At backend exit: fold the slot into the totals and free it.  Anything the
 * connection still carries afterwards (the closing alert) is counted
 * locally only.
 */
static void
sslr_detach_slot(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	SslrEntry  *entry = sslr_my_entry;

	if (entry == NULL || sslr_my_slot == &sslr_local_slot)
		return;

	LWLockAcquire(sslr_shared->lock, LW_EXCLUSIVE);
	sslr_tally_add(&sslr_shared->totals.tally, &entry->slot.stats.tally, 1);
	sslr_tally_add(&sslr_shared->totals.tally, &entry->baseline, -1);
	memset(&entry->baseline, 0, sizeof(entry->baseline));
	sslr_local_slot = entry->slot;
	sslr_local_slot.stats.requests_seen = 0;
	sslr_my_slot = &sslr_local_slot;
	sslr_my_requests = &sslr_no_requests;
	SSLR_BEGIN_WRITE(&entry->slot);
	entry->slot.pid = 0;
	SSLR_END_WRITE(&entry->slot);
	LWLockRelease(sslr_shared->lock);
}

/*
 * Copy a slot consistently: retry until the copy was not overlapped by a
 * write of its owner.
 */
void
sslr_read_slot(int index, SslrSlot *copy)
{
	volatile SslrSlot *slot = &sslr_shared->entries[index].slot;

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

/* The early sums, as a tally; returns their connection count. */
static int64
sslr_read_early(SslrTally *tally)
{
	int64	   *t = (int64 *) tally;

	for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
		t[i] = (int64) pg_atomic_read_u64(&sslr_shared->early.tally[i]);
	return (int64) pg_atomic_read_u64(&sslr_shared->early.connections);
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
	SslrLiveTally *live = palloc(sizeof(SslrLiveTally) * MaxBackends);
	int			nlive = 0;
	SslrSlot	copy;
	SslrTally	early;

	LWLockAcquire(sslr_shared->lock, LW_SHARED);
	*totals = sslr_shared->totals;
	totals->connections += sslr_read_early(&early);
	sslr_tally_add(&totals->tally, &early, 1);
	for (int i = 0; i < MaxBackends; i++)
	{
		SslrEntry  *entry = &sslr_shared->entries[i];

		if (entry->slot.pid == 0)
			continue;
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		live[nlive].userid = copy.userid;
		live[nlive].tally = copy.stats.tally;
		sslr_tally_add(&live[nlive].tally, &entry->baseline, -1);
		nlive++;
	}
	LWLockRelease(sslr_shared->lock);

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
	SslrTotals *totals = &sslr_shared->totals;

	LWLockAcquire(sslr_shared->lock, LW_EXCLUSIVE);
	memset(totals, 0, sizeof(SslrTotals));
	totals->connections -= sslr_read_early(&early);
	sslr_tally_add(&totals->tally, &early, -1);
	for (int i = 0; i < MaxBackends; i++)
	{
		SslrEntry  *entry = &sslr_shared->entries[i];

		if (entry->slot.pid == 0)
			continue;
		sslr_read_slot(i, &copy);
		if (copy.pid == 0)
			continue;
		entry->baseline = copy.stats.tally;
	}
	totals->stats_reset = GetCurrentTimestamp();
	LWLockRelease(sslr_shared->lock);
}

/* ---------------------------------------------------------------------
 * The totals across a clean restart
 * ---------------------------------------------------------------------
 */
#define SSLR_TOTALS_FILE	PGSTAT_STAT_PERMANENT_DIRECTORY "/ssl_renegotiate.stat"
#define SSLR_TOTALS_MAGIC	0x534c5352	/* "SSLR" */
#define SSLR_TOTALS_FORMAT	1

typedef struct SslrTotalsFile
{
	uint32		magic;
	uint32		format;
	uint32		size;			/* sizeof(SslrTotals) */
	SslrTotals	totals;
	pg_crc32c	crc;			/* of everything above */
} SslrTotalsFile;

static pg_crc32c
sslr_totals_crc(const SslrTotalsFile *data)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, offsetof(SslrTotalsFile, crc));
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Did the cluster just shut down cleanly?  pg_control says so once the
 * shutdown checkpoint is written; after an immediate stop or a crash it
 * still says "in production".  Read by hand: nothing here may ERROR.
 */
static bool
sslr_shut_down_cleanly(void)
{
	ControlFileData control;
	pg_crc32c	crc;
	char		path[MAXPGPATH];
	int			fd;
	bool		read_all;

	snprintf(path, sizeof(path), "%s/%s", DataDir, XLOG_CONTROL_FILE);
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
		return false;
	read_all = read(fd, &control, sizeof(control)) == sizeof(control);
	close(fd);
	if (!read_all)
		return false;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &control, offsetof(ControlFileData, crc));
	FIN_CRC32C(crc);
	return EQ_CRC32C(crc, control.crc) &&
		(control.state == DB_SHUTDOWNED || control.state == DB_SHUTDOWNED_IN_RECOVERY);
}

/* At postmaster exit: keep the totals if the cluster shut down cleanly. */
static void
sslr_shmem_shutdown(int code, Datum arg pg_attribute_unused())
{
	SslrTotalsFile data;
	SslrTally	early;
	FILE	   *file;
	bool		written;

	if (code != 0 || sslr_shared == NULL || !sslr_shut_down_cleanly())
		return;

	memset(&data, 0, sizeof(data));
	data.magic = SSLR_TOTALS_MAGIC;
	data.format = SSLR_TOTALS_FORMAT;
	data.size = sizeof(SslrTotals);
	data.totals = sslr_shared->totals;
	data.totals.connections += sslr_read_early(&early);
	sslr_tally_add(&data.totals.tally, &early, 1);
	data.crc = sslr_totals_crc(&data);

	file = AllocateFile(SSLR_TOTALS_FILE ".tmp", PG_BINARY_W);
	if (file == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SSLR_TOTALS_FILE ".tmp")));
		return;
	}
	written = fwrite(&data, sizeof(data), 1, file) == 1;
	if (FreeFile(file) != 0 || !written)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SSLR_TOTALS_FILE ".tmp")));
		unlink(SSLR_TOTALS_FILE ".tmp");
		return;
	}
	(void) durable_rename(SSLR_TOTALS_FILE ".tmp", SSLR_TOTALS_FILE, LOG);
}

/*
 * When the postmaster creates shared memory: the totals saved at the last
 * clean shutdown, if any.  The file is removed once read, so that a crash
 * restart finds none.
 */
static void
sslr_load_totals(SslrTotals *totals)
{
	SslrTotalsFile data;
	const char *problem = NULL;
	FILE	   *file = AllocateFile(SSLR_TOTALS_FILE, PG_BINARY_R);

	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", SSLR_TOTALS_FILE)));
		return;
	}
	if (fread(&data, sizeof(data), 1, file) != 1 || fgetc(file) != EOF)
		problem = "it is not of the expected size";
	else if (data.magic != SSLR_TOTALS_MAGIC || data.format != SSLR_TOTALS_FORMAT ||
			 data.size != sizeof(SslrTotals))
		problem = "it is of another format";
	else if (!EQ_CRC32C(data.crc, sslr_totals_crc(&data)))
		problem = "its checksum does not match";
	FreeFile(file);

	if (problem)
		ereport(LOG,
				(errmsg("ssl_renegotiate: ignoring the totals saved in \"%s\": %s",
						SSLR_TOTALS_FILE, problem),
				 errdetail("The totals start again from zero.")));
	else
		*totals = data.totals;
	unlink(SSLR_TOTALS_FILE);
}

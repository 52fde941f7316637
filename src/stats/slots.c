/*-------------------------------------------------------------------------
 *
 * slots.c
 *	  A connection's counts while it lasts: one slot per possible backend in
 *	  shared memory, and a local one before and after.
 *
 * There is one slot per possible backend (MaxBackends), indexed by the
 * backend's number, so walsenders have slots too.
 *
 * Where a connection's counts live:
 *	- Before authentication (the TLS handshake, the startup packet) a
 *	  backend counts into a backend-local slot *and*, with atomics, into
 *	  the shared sum of preauth.c, which only privileged readers see: such
 *	  a backend may have no PGPROC (so no LWLock), and it may leave by
 *	  _exit() (startup packet timeout, SIGTERM during start-up), which runs
 *	  no exit callback.
 *	- From authentication on it counts into its shared slot, which starts
 *	  with the local counts: totals.c makes them the slot's baseline in the
 *	  same step, as the sum holds them already.
 *	- After the slot is freed at exit, later traffic (the closing alert) is
 *	  counted locally only.
 *
 * Locking rules:
 *	- A slot is written only by the backend that owns it, with no lock.
 *	  The counters of its tally, which the record path adds to, are plain
 *	  8-byte stores, and readers take them one field at a time
 *	  (sslr_slots_read_tally): a reader never waits for the owner, even one
 *	  stopped in the middle of a record.  Everything else the owner writes
 *	  between two increments of changecount (odd means "write in
 *	  progress"); readers of a whole slot (sslr_slots_read) copy it again
 *	  until they saw the same even changecount on both sides of the copy,
 *	  backing off, holding no lock, and can be cancelled.  Those writes are
 *	  rare (a key change, the cipher, the limits in force).
 *	- A slot changes hands (pid set or cleared) only under the extension's
 *	  LWLock held exclusively, which totals.c takes around sslr_slot_take
 *	  and sslr_slot_free so that the totals see a connection's counts move
 *	  in one step.  Such a change is also bracketed by the "moves" count
 *	  (odd while in progress), with which readers of the totals check,
 *	  without the lock, that no move overlapped their reading
 *	  (sslr_slots_moves_read_begin, sslr_slots_moves_read_retry).
 *	- The sum of preauth.c is atomics, added to without any lock.
 *	- Operator requests (ssl_renegotiate_rekey) are counted by the
 *	  requesters in an atomic beside the slot, under the lock held shared,
 *	  so that a request always reaches the backend that was asked.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/walsender.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/s_lock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "stats/preauth.h"
#include "stats/slots.h"

typedef struct SslrEntry
{
	SslrSlot	slot;			/* written by its owner only */
	pg_atomic_uint64 requests;	/* operator requests, added under the lock */
} SslrEntry;

typedef struct SslrSlots
{
	LWLock	   *lock;
	uint32		moves;			/* odd while slots change hands: see above */
	SslrEntry	entries[FLEXIBLE_ARRAY_MEMBER];
} SslrSlots;

static SslrSlots *sslr_slots = NULL;

/* Counts of the handshake, and of the time after detaching. */
static SslrSlot sslr_local_slot;
static SslrEntry *sslr_my_entry = NULL;

SslrSlot   *sslr_my_slot = &sslr_local_slot;

/* No requests reach a backend before it attaches. */
static pg_atomic_uint64 sslr_no_requests;
pg_atomic_uint64 *sslr_my_requests = &sslr_no_requests;

static Size
sslr_slots_shmem_size(void)
{
	return add_size(offsetof(SslrSlots, entries),
					mul_size(MaxBackends, sizeof(SslrEntry)));
}

void
sslr_slots_shmem_request(void)
{
	RequestAddinShmemSpace(sslr_slots_shmem_size());
	RequestNamedLWLockTranche("ssl_renegotiate", 1);
}

void
sslr_slots_shmem_startup(void)
{
	bool		found;

	pg_atomic_init_u64(&sslr_no_requests, 0);

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_slots = ShmemInitStruct("ssl_renegotiate", sslr_slots_shmem_size(), &found);
	if (!found)
	{
		memset(sslr_slots, 0, sslr_slots_shmem_size());
		sslr_slots->lock = &(GetNamedLWLockTranche("ssl_renegotiate"))->lock;
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u64(&sslr_slots->entries[i].requests, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

bool
sslr_slots_ready(void)
{
	return sslr_slots != NULL;
}

/* Guards slots changing hands, and the totals (totals.c). */
LWLock *
sslr_slots_lock(void)
{
	return sslr_slots->lock;
}

int
sslr_slot_count(void)
{
	return MaxBackends;
}

/* Index of a member of this backend's tally, as in preauth.c's counts. */
static inline int
sslr_tally_field(const int64 *member)
{
	const int64 *first = (const int64 *) &sslr_my_slot->stats.tally;

	Assert(member >= first && member < first + SSLR_TALLY_FIELDS);
	return (int) (member - first);
}

/*
 * Bytes and records before authentication, counted in the local slot too:
 * into the shared sum (preauth.c), with no lock.
 */
void
sslr_slot_add_early(SslrDirection dir, int64 wire_bytes, int64 records)
{
	if (wire_bytes != 0)
		sslr_preauth_count(sslr_tally_field(&sslr_my_slot->stats.tally.bytes[dir]), wire_bytes);
	if (records != 0)
		sslr_preauth_count(sslr_tally_field(&sslr_my_slot->stats.tally.records[dir]), records);
}

/*
 * Add to one of this backend's tally counters (a member of
 * sslr_my_slot->stats.tally); before authentication to the sum too.
 */
void
sslr_slot_add(int64 *counter, int64 amount)
{
	SslrSlot   *slot = sslr_my_slot;
	int			field = sslr_tally_field(counter);

	SSLR_BEGIN_WRITE(slot);
	*counter += amount;
	SSLR_END_WRITE(slot);

	sslr_preauth_count(field, amount);
}

/*
 * A reader waiting for a writer (of a slot, or of a move) to finish: a few
 * quick retries, then a millisecond's sleep at a time.  Holds no lock, and
 * can be cancelled.
 */
static void
sslr_back_off(int attempt)
{
	if (attempt < 4)
	{
		SPIN_DELAY();
		return;
	}
	CHECK_FOR_INTERRUPTS();
	pg_usleep(1000L);
	CHECK_FOR_INTERRUPTS();
}

/* Writers (under the lock held exclusively): a move starts, and ends. */
void
sslr_slots_moves_begin(void)
{
	Assert(LWLockHeldByMeInMode(sslr_slots->lock, LW_EXCLUSIVE));
	Assert((sslr_slots->moves & 1) == 0);
	sslr_slots->moves++;
	pg_write_barrier();
}

void
sslr_slots_moves_end(void)
{
	pg_write_barrier();
	sslr_slots->moves++;
}

/* Readers, with no lock: the moves count once no move is in progress. */
uint32
sslr_slots_moves_read_begin(void)
{
	for (int attempt = 0;; attempt++)
	{
		uint32		seen = ((volatile SslrSlots *) sslr_slots)->moves;

		if ((seen & 1) == 0)
		{
			pg_read_barrier();
			return seen;
		}
		sslr_back_off(attempt);
	}
}

/* Whether a move overlapped what was read since seen: then read again. */
bool
sslr_slots_moves_read_retry(uint32 seen)
{
	pg_read_barrier();
	return ((volatile SslrSlots *) sslr_slots)->moves != seen;
}

/* The slot this backend takes when it attaches. */
int
sslr_slots_backend_index(void)
{
	int			index = SSLR_MY_BACKEND_INDEX;

	if (index < 0 || index >= MaxBackends)
		elog(ERROR, "ssl_renegotiate: backend index %d out of range", index);
	return index;
}

bool
sslr_slot_attached(void)
{
	return sslr_my_entry != NULL;
}

/*
 * Take the shared slot at index, carrying over what the handshake counted.
 * The caller holds the lock exclusively.
 */
void
sslr_slot_take(int index, Port *port)
{
	SslrEntry  *entry = &sslr_slots->entries[index];

	Assert(LWLockHeldByMeInMode(sslr_slots->lock, LW_EXCLUSIVE));
	SSLR_BEGIN_WRITE(&entry->slot);
	entry->slot.pid = MyProcPid;
	/* not known yet, nor the database: see sslr_slot_publish_userid */
	entry->slot.userid = InvalidOid;
	entry->slot.identity_known = false;
	entry->slot.is_walsender = am_walsender;
	strlcpy(entry->slot.version, SSL_get_version(port->ssl), sizeof(entry->slot.version));
	strlcpy(entry->slot.cipher, SSL_get_cipher_name(port->ssl), sizeof(entry->slot.cipher));
	entry->slot.stats = sslr_local_slot.stats;
	entry->slot.stats.requests_seen = 0;
	entry->slot.limits.known = false;	/* not the previous owner's */
	SSLR_END_WRITE(&entry->slot);
	pg_atomic_write_u64(&entry->requests, 0);
	sslr_my_entry = entry;
	sslr_my_slot = &entry->slot;
	sslr_my_requests = &entry->requests;
}

/*
 * Free this backend's slot at exit, once its counts are in the totals.
 * Anything the connection still carries afterwards (the closing alert) is
 * counted locally only.  The caller holds the lock exclusively.
 */
void
sslr_slot_free(void)
{
	SslrEntry  *entry = sslr_my_entry;

	Assert(LWLockHeldByMeInMode(sslr_slots->lock, LW_EXCLUSIVE));
	sslr_local_slot = entry->slot;
	sslr_local_slot.stats.requests_seen = 0;
	sslr_my_slot = &sslr_local_slot;
	sslr_my_requests = &sslr_no_requests;
	sslr_my_entry = NULL;
	SSLR_BEGIN_WRITE(&entry->slot);
	entry->slot.pid = 0;
	SSLR_END_WRITE(&entry->slot);
}

/*
 * The session user and database are set after authentication; policy.c
 * calls this from the next safe points until both are known.  The user is
 * published as soon as it is known.  Returns true once both are.
 */
bool
sslr_slot_publish_userid(void)
{
	SslrSlot   *slot = sslr_my_slot;
	Oid			dbid = InvalidOid;
	Oid			userid;
	bool		known;

	if (slot == &sslr_local_slot || slot->identity_known)
		return true;
	if (MyProc == NULL || !OidIsValid(MyProc->roleId))
		return false;
	known = sslr_session_identity(&dbid, &userid);
	SSLR_BEGIN_WRITE(slot);
	slot->userid = MyProc->roleId;
	slot->dbid = dbid;
	pg_write_barrier();			/* for readers of sslr_slots_read_tally */
	slot->identity_known = known;
	SSLR_END_WRITE(slot);
	return known;
}

/*
 * The protocol version and cipher in force, after a renegotiation changed
 * them.  Only string copies: this runs inside OpenSSL's callbacks.
 */
void
sslr_slot_publish_cipher(SSL *ssl)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	strlcpy(slot->version, SSL_get_version(ssl), sizeof(slot->version));
	strlcpy(slot->cipher, SSL_get_cipher_name(ssl), sizeof(slot->cipher));
	SSLR_END_WRITE(slot);
}

/* Whether a rotation we asked the peer for is still unanswered. */
void
sslr_slot_publish_rekey_pending(bool pending)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.rekey_pending = pending;
	SSLR_END_WRITE(slot);
}

void
sslr_slot_publish_record_limit(int64 record_limit)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.record_limit = record_limit;
	SSLR_END_WRITE(slot);
}

/* Operator requests picked up, and whether one is still being carried out. */
void
sslr_slot_publish_request(int64 seen, bool pending)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.requests_seen = seen;
	slot->stats.request_pending = pending;
	SSLR_END_WRITE(slot);
}

/*
 * A TLS 1.2 renegotiation of ours left for later: application data from
 * the client was waiting (renegotiation.c).
 */
void
sslr_slot_publish_renegotiation_deferred(void)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.renegotiations_deferred++;
	SSLR_END_WRITE(slot);
}

/* The limits in force: a plain write, fit for an assign hook or OpenSSL. */
void
sslr_slot_publish_limits(const SslrLimitsInForce *limits)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->limits = *limits;
	SSLR_END_WRITE(slot);
}

/*
 * One direction's key changed: retire the old key's counters.  Returns the
 * bytes the old key carried.
 */
int64
sslr_slot_publish_key_retired(SslrDirection dir, TimestampTz now)
{
	SslrSlot   *slot = sslr_my_slot;
	SslrConnStats *stats = &slot->stats;
	int64		bytes = stats->bytes_under_key[dir];

	SSLR_BEGIN_WRITE(slot);
	if (bytes > stats->max_bytes_per_key[dir])
		stats->max_bytes_per_key[dir] = bytes;
	stats->bytes_under_key[dir] = 0;
	stats->records_under_key[dir] = 0;
	stats->last_rekey = now;
	SSLR_END_WRITE(slot);
	return bytes;
}

/*
 * Copy a slot consistently: again while the copy was overlapped by a write
 * of its owner, backing off (the caller holds no lock).  The counters of
 * the tally are taken as they are (see the file header): the record path
 * writes them without the change count.
 */
void
sslr_slots_read(int index, SslrSlot *copy)
{
	volatile SslrSlot *slot = &sslr_slots->entries[index].slot;

	for (int attempt = 0;; attempt++)
	{
		int			before = slot->changecount;
		int			after;

		pg_read_barrier();
		memcpy(copy, (const SslrSlot *) slot, sizeof(SslrSlot));
		pg_read_barrier();
		after = slot->changecount;

		if (before == after && (before & 1) == 0)
			break;
		sslr_back_off(attempt);
	}
}

/*
 * What the totals need of a slot, field by field, never waiting: its
 * owner's identity (identity_known before the ids it covers: see
 * sslr_slot_publish_userid) and counters.  Whether the slot changed hands
 * meanwhile is the caller's to check (sslr_slots_moves_read_retry).
 */
void
sslr_slots_read_tally(int index, SslrSlotTally *copy)
{
	volatile SslrSlot *slot = &sslr_slots->entries[index].slot;
	const volatile int64 *from = (const volatile int64 *) &slot->stats.tally;
	int64	   *to = (int64 *) &copy->tally;

	copy->pid = slot->pid;
	copy->identity_known = slot->identity_known;
	pg_read_barrier();
	copy->userid = slot->userid;
	copy->dbid = slot->dbid;
	for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
		to[i] = from[i];
}

/* Requests made of the backend in slot index so far. */
int64
sslr_slots_read_requests(int index)
{
	return (int64) pg_atomic_read_u64(&sslr_slots->entries[index].requests);
}

/*
 * Ask the TLS backend with this pid to rotate its keys.  Under the lock
 * held shared, so that the slot cannot change hands meanwhile: a request
 * reaches the backend that was asked, never the next owner of its slot.
 * Returns false if no attached TLS backend has this pid.
 */
bool
sslr_slots_request_rekey(int pid)
{
	bool		found = false;

	LWLockAcquire(sslr_slots->lock, LW_SHARED);
	for (int i = 0; i < MaxBackends && !found; i++)
	{
		SslrEntry  *entry = &sslr_slots->entries[i];

		if (entry->slot.pid != pid)
			continue;
		pg_atomic_fetch_add_u64(&entry->requests, 1);
		found = true;
	}
	LWLockRelease(sslr_slots->lock);
	return found;
}

/*-------------------------------------------------------------------------
 *
 * slots.h
 *	  A connection's counts while it lasts: its slot in shared memory, the
 *	  change-count protocol, operator requests.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SLOTS_H
#define SSLR_SLOTS_H

#include "datatype/timestamp.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/walsender.h"
#include "storage/lwlock.h"
#include "storage/proc.h"

#include <openssl/ssl.h>

#include "sslr_types.h"

/* Per-connection counters, in the backend's slot. */
typedef struct SslrConnStats
{
	SslrTally	tally;
	int64		bytes_under_key[SSLR_NDIRECTIONS];
	int64		records_under_key[SSLR_NDIRECTIONS];
	int64		max_bytes_per_key[SSLR_NDIRECTIONS];	/* among retired keys */
	TimestampTz last_rekey;
	int64		record_limit;	/* records per key of the cipher in force */
	int64		requests_seen;	/* operator requests picked up */
	int64		renegotiations_deferred;	/* TLS 1.2: data was waiting */
	bool		rekey_pending;	/* a rekey we asked the peer for is unanswered */
	bool		request_pending;	/* an operator request not yet carried out */
} SslrConnStats;

/*
 * The limits the owner enforces, as it sees its settings after role,
 * database and session settings (0: off), for its row of the activity view.
 * known is false until the owner starts enforcing (policy.c publishes them
 * in the same hook that takes the slot).
 */
typedef struct SslrLimitsInForce
{
	bool		known;
	int64		byte_limit;		/* bytes under one key */
	int64		hard_limit;		/* bytes under one key */
	int64		interval_ms;
	SslrTls12Policy tls12;
} SslrLimitsInForce;

#define SSLR_VERSION_LEN 16
#define SSLR_CIPHER_LEN 64

/*
 * One backend's slot.  Written only by its owner: the counters of its
 * tally by plain stores, one 8-byte field at a time (the record path);
 * everything else between increments of changecount (odd while a write is
 * in progress).  See slots.c.
 */
typedef struct SslrSlot
{
	int			changecount;
	int			pid;			/* 0 when the slot is free */
	Oid			userid;
	Oid			dbid;			/* 0: a walsender without a database */
	bool		identity_known; /* userid and dbid are final */
	bool		is_walsender;
	char		version[SSLR_VERSION_LEN];
	char		cipher[SSLR_CIPHER_LEN];
	SslrConnStats stats;
	SslrLimitsInForce limits;
} SslrSlot;

/*
 * The slot this backend writes: a backend-local one during the handshake,
 * the shared one once attached, the local one again after detaching.
 */
extern SSLR_HOT_DATA SslrSlot *sslr_my_slot;

/*
 * Operator requests for this backend's connection (ssl_renegotiate_rekey),
 * counted by the requesters in shared memory; the record callback compares
 * it with sslr_my_slot->stats.requests_seen.
 */
extern SSLR_HOT_DATA pg_atomic_uint64 *sslr_my_requests;

/*
 * What the totals need of a slot, read field by field without waiting
 * (sslr_slots_read_tally): whose it is, and its counters.
 */
typedef struct SslrSlotTally
{
	int			pid;			/* 0 when the slot is free */
	bool		identity_known;
	Oid			userid;
	Oid			dbid;
	SslrTally	tally;
} SslrSlotTally;

/* Writer side of the change-count protocol. */
#define SSLR_BEGIN_WRITE(slot) \
	do { (slot)->changecount++; pg_write_barrier(); } while (0)
#define SSLR_END_WRITE(slot) \
	do { pg_write_barrier(); (slot)->changecount++; } while (0)

/*
 * This backend's role and database, once InitPostgres has set both (after
 * ClientAuthentication_hook).  A walsender for physical replication has no
 * database: dbid 0.
 */
static inline bool
sslr_session_identity(Oid *dbid, Oid *userid)
{
	if (MyProc == NULL || !OidIsValid(MyProc->roleId))
		return false;
	if (!OidIsValid(MyDatabaseId) && !(am_walsender && !am_db_walsender))
		return false;
	*dbid = MyDatabaseId;
	*userid = MyProc->roleId;
	return true;
}

/* shared memory */
extern void sslr_slots_shmem_request(void);
extern void sslr_slots_shmem_startup(void);
extern bool sslr_slots_ready(void);
extern LWLock *sslr_slots_lock(void);
extern int	sslr_slot_count(void);

/* this backend's counting */
extern void sslr_slot_add_early(SslrDirection dir, int64 wire_bytes, int64 records);
extern void sslr_slot_add(int64 *counter, int64 amount);

/*
 * Slots changing hands, and the totals of totals.c and role_totals.c
 * changing with them: writers hold the lock exclusively and bracket the
 * change; readers hold no lock and read again if a change overlapped.
 */
extern void sslr_slots_moves_begin(void);
extern void sslr_slots_moves_end(void);
extern uint32 sslr_slots_moves_read_begin(void);
extern bool sslr_slots_moves_read_retry(uint32 seen);

/* taking and freeing this backend's slot (the caller holds the lock) */
extern int	sslr_slots_backend_index(void);
extern bool sslr_slot_attached(void);
extern void sslr_slot_take(int index, Port *port);
extern void sslr_slot_free(void);

/* the owner's writes */
extern bool sslr_slot_publish_userid(void);
extern void sslr_slot_publish_cipher(SSL *ssl);
extern void sslr_slot_publish_rekey_pending(bool pending);
extern void sslr_slot_publish_record_limit(int64 record_limit);
extern void sslr_slot_publish_request(int64 seen, bool pending);
extern void sslr_slot_publish_renegotiation_deferred(void);
extern void sslr_slot_publish_limits(const SslrLimitsInForce *limits);
extern int64 sslr_slot_publish_key_retired(SslrDirection dir, TimestampTz now);

/* other backends' reads and requests; none waits under a lock */
extern void sslr_slots_read(int index, SslrSlot *copy);
extern void sslr_slots_read_tally(int index, SslrSlotTally *copy);
extern int64 sslr_slots_read_requests(int index);
extern bool sslr_slots_request_rekey(int pid);

#endif							/* SSLR_SLOTS_H */

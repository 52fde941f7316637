/*-------------------------------------------------------------------------
 *
 * ssl_renegotiate.h
 *	  Private types and entry points shared by the rooms of ssl_renegotiate.
 *
 * The flow of one byte: OpenSSL's record layer calls accounting.c, which
 * adds the record to this connection's slot (shmem.c) and compares it with
 * the thresholds policy.c computed.  When one is crossed, policy.c decides
 * at a safe point: between two messages (sendpoint.c, the wrapped
 * PqCommMethods) or on the inbound record path, where it may only ask the
 * peer.  The mechanisms carry the decision out: keyupdate.c (TLS 1.3),
 * renegotiation.c (TLS 1.2), ending.c (ending a connection, and the log
 * lines that cannot be written where they were decided).  sql_api.c reads
 * the slots and totals for the views.
 *
 * Calls go one way, down: ssl_renegotiate.c -> accounting.c, sendpoint.c ->
 * policy.c -> keyupdate.c, renegotiation.c, ending.c -> shmem.c (an alert
 * goes from accounting.c to renegotiation.c directly); sql_api.c reads
 * shmem.c only.  scripts/rooms.sh checks it in "make lint".
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSL_RENEGOTIATE_H
#define SSL_RENEGOTIATE_H

#include <signal.h>

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "libpq/libpq.h"
#include "libpq/libpq-be.h"
#include "portability/instr_time.h"
#include "storage/lwlock.h"
#include "utils/timeout.h"

#include <openssl/ssl.h>

/*
 * Data the hot paths read on every message: hidden from the dynamic symbol
 * table, so that the code reaches it directly instead of through the GOT.
 */
#if defined(__GNUC__)
#define SSLR_HOT_DATA __attribute__((visibility("hidden")))
#else
#define SSLR_HOT_DATA
#endif

/* Direction of traffic, seen from the server. */
typedef enum SslrDirection
{
	SSLR_SENT = 0,
	SSLR_RECEIVED = 1
} SslrDirection;

#define SSLR_NDIRECTIONS 2

/* What a connection on TLS 1.2 does when it reaches a limit. */
typedef enum SslrTls12Policy
{
	SSLR_TLS12_RENEGOTIATE,
	SSLR_TLS12_WARN,
	SSLR_TLS12_TERMINATE
} SslrTls12Policy;

/* "Never", for thresholds and limits. */
#define SSLR_NO_LIMIT			PG_INT64_MAX

/*
 * Cumulative counts that are summed into the cluster totals.  Every member
 * is an int64 so that the totals code can add and subtract tallies field by
 * field (see sslr_tally_add); keep it that way.
 */
typedef struct SslrTally
{
	int64		bytes[SSLR_NDIRECTIONS];	/* TLS bytes on the wire */
	int64		records[SSLR_NDIRECTIONS];	/* TLS records */
	int64		rekeys[SSLR_NDIRECTIONS];	/* key rotations, per direction */
	int64		rekey_failures; /* rekeys attempted that did not happen */
	int64		rekeys_skipped; /* limits reached where policy said carry on */
	int64		peer_renegotiations_refused;	/* client-initiated, refused */
	int64		terminations;	/* connections ended by a limit */
	int64		rekey_time_us;	/* time spent in server-initiated rekeys */
} SslrTally;

#define SSLR_TALLY_FIELDS (sizeof(SslrTally) / sizeof(int64))

/* Per-connection counters, in the backend's shared slot. */
typedef struct SslrConnStats
{
	SslrTally	tally;
	int64		bytes_under_key[SSLR_NDIRECTIONS];
	int64		records_under_key[SSLR_NDIRECTIONS];
	int64		max_bytes_per_key[SSLR_NDIRECTIONS];	/* among retired keys */
	TimestampTz last_rekey;
	bool		rekey_pending;	/* a rekey we asked the peer for is unanswered */
	int64		record_limit;	/* records per key of the cipher in force */
	int64		requests_seen;	/* operator requests picked up */
	bool		request_pending;	/* ... and not yet carried out both ways */
} SslrConnStats;

#define SSLR_VERSION_LEN 16
#define SSLR_CIPHER_LEN 64

/*
 * One backend's slot.  Written only by its owner, between increments of
 * changecount (odd while a write is in progress); see shmem.c.
 */
typedef struct SslrSlot
{
	int			changecount;
	int			pid;			/* 0 when the slot is free */
	Oid			userid;
	bool		is_walsender;
	char		version[SSLR_VERSION_LEN];
	char		cipher[SSLR_CIPHER_LEN];
	SslrConnStats stats;
} SslrSlot;

/* Cluster totals, guarded by the extension's LWLock. */
typedef struct SslrTotals
{
	int64		connections;
	SslrTally	tally;
	TimestampTz stats_reset;
} SslrTotals;

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

/* Writer side of the change-count protocol. */
#define SSLR_BEGIN_WRITE(slot) \
	do { (slot)->changecount++; pg_write_barrier(); } while (0)
#define SSLR_END_WRITE(slot) \
	do { pg_write_barrier(); (slot)->changecount++; } while (0)

/* ---------------------------------------------------------------------
 * One connection's rotation state: a part per room
 * ---------------------------------------------------------------------
 */

/* Why a limit ends a connection. */
typedef enum SslrEndReason
{
	SSLR_END_NONE,
	SSLR_END_HARD_LIMIT,		/* ssl_renegotiate.hard_limit */
	SSLR_END_TLS12,				/* ssl_renegotiate.tls12 = terminate */
	SSLR_END_TLS12_REQUEST,		/* ... and an operator asked for new keys */
	SSLR_END_KEY_UPDATE_FLOOD	/* ssl_renegotiate.max_peer_key_updates */
} SslrEndReason;

/* policy.c: when each direction rotates. */
typedef struct SslrPolicyState
{
	bool		tls13;
	int64		cipher_record_limit;	/* records per key, of the cipher in force */
	TimeoutId	timeout_id;
	volatile sig_atomic_t interval_due; /* the timer fired: look at the clocks */
	bool		interval_expired[SSLR_NDIRECTIONS];
	TimestampTz key_since[SSLR_NDIRECTIONS];
	bool		rotation_blocked[SSLR_NDIRECTIONS]; /* failed: wait for a new key */
	bool		requested[SSLR_NDIRECTIONS];	/* an operator asked for a new key */
	bool		tls12_warned;	/* "warn" said its line */
} SslrPolicyState;

/* keyupdate.c: TLS 1.3. */
typedef struct SslrKeyUpdateState
{
	/* our one outstanding request to the peer */
	int64		request_at_bytes;
	TimestampTz request_time;
	int64		peer_lag;		/* bytes between our last request and its answer */
	/* the budget of key updates the peer sends unasked */
	int64		budget_credit;
	int64		budget_bytes;
	TimestampTz budget_time;
	int64		unasked;
	/* our own KeyUpdate in progress, for its duration */
	instr_time	send_start;
	bool		sending;
} SslrKeyUpdateState;

/* renegotiation.c: TLS 1.2. */
typedef struct SslrRenegotiationState
{
	uint64		window_options; /* options lifted while ours runs */
	bool		in_flight;
	int			finished_seen;	/* bit 1: ours, bit 2: the client's */
	bool		wait_over;		/* this attempt waited all it may */
	TimestampTz deadline;
	bool		verify_peer_pending;
	bool		peer_refused;
	bool		unanswered_pending; /* to be logged */
	bool		cipher_change_pending;	/* to be logged */
	char		previous_cipher[SSLR_CIPHER_LEN];
} SslrRenegotiationState;

/* sendpoint.c: the wrapped PqCommMethods. */
typedef struct SslrSendPointState
{
	bool		installed;
	PQcommMethods prev;			/* what we wrapped, copied */
	PQcommMethods comm;
	bool		busy;			/* inside a safe point: no nesting */
	bool		in_noblock;		/* inside PostgreSQL's putmessage_noblock */
} SslrSendPointState;

/* ending.c: what the inbound path decided and could not do. */
#define SSLR_LOG_QUEUE 16

typedef struct SslrRekeyLog
{
	SslrDirection dir;
	bool		peer_initiated;
	int64		bytes_under_old_key;
	int64		duration_us;
} SslrRekeyLog;

typedef struct SslrEndingState
{
	SslrRekeyLog log_queue[SSLR_LOG_QUEUE];
	int			log_queued;
	int64		log_dropped;
	bool		skipped_pending;	/* "carry on" to be logged */
	bool		request_log_pending;	/* an operator request, to be logged */
	SslrEndReason deferred;
	int64		deferred_amount;
} SslrEndingState;

typedef struct SslrConn
{
	Port	   *port;			/* NULL until authenticated */
	SSL		   *ssl;
	bool		safe_point_work;	/* something to do at the next safe point */
	bool		userid_pending;
	SslrPolicyState policy;
	SslrKeyUpdateState keyupdate;
	SslrRenegotiationState renegotiation;
	SslrSendPointState sendpoint;
	SslrEndingState ending;
} SslrConn;

extern SSLR_HOT_DATA SslrConn sslr_conn;

/*
 * What the hot paths compare with (policy.c keeps them current): bytes and
 * records under the current key at which each direction needs attention.
 * SSLR_NO_LIMIT means never.  The send side compares bytes only; its
 * record limit is checked by the record callback, which then zeroes the
 * byte threshold.
 */
extern SSLR_HOT_DATA volatile int64 sslr_attention_bytes[SSLR_NDIRECTIONS];
extern SSLR_HOT_DATA volatile int64 sslr_attention_records[SSLR_NDIRECTIONS];

/* Have the next send point do its slow work. */
static inline void
sslr_want_safe_point(void)
{
	sslr_conn.safe_point_work = true;
	sslr_attention_bytes[SSLR_SENT] = 0;
}

/* settings (ssl_renegotiate.c) */
extern int	sslr_byte_limit_kb;
extern int	sslr_interval_s;
extern int	sslr_hard_limit_kb;
extern int	sslr_tls12_policy;
extern bool sslr_log_rekeys;
extern int	sslr_max_peer_key_updates;

/* accounting.c */
extern void sslr_accounting_init(void);
extern void sslr_accounting_attached(SSL *ssl);

/* sendpoint.c */
extern void sslr_sendpoint_install(void);

/* policy.c */
extern void sslr_rekey_start(Port *port);
extern void sslr_policy_changed(void);
extern void sslr_policy_comm_reset(void);
extern void sslr_policy_send_point(bool may_block);
extern void sslr_receive_attention(SSL *ssl);
extern void sslr_key_rotated(SSL *ssl, SslrDirection dir);
extern void sslr_handshake_message(int write_p, int msg_type);
extern void sslr_rekey_requested(SSL *ssl);

/* keyupdate.c: credit for one unasked key update of the peer (a full record) */
#define SSLR_PEER_UPDATE_BYTES	16384

/* what an attempt came to */
typedef enum SslrAttempt
{
	SSLR_ATTEMPT_DONE,
	SSLR_ATTEMPT_RETRY,			/* not now: try at the next safe point */
	SSLR_ATTEMPT_FAILED
} SslrAttempt;

extern SslrAttempt sslr_keyupdate_send(void);
extern SslrAttempt sslr_keyupdate_request(SSL *ssl);
extern int64 sslr_keyupdate_sent_duration(void);
extern int64 sslr_keyupdate_answered(TimestampTz now);
extern bool sslr_keyupdate_unasked_allowed(TimestampTz now);

/* renegotiation.c */
extern void sslr_renegotiation_setup(SSL *ssl);
extern bool sslr_renegotiation_start(SSL *ssl);
extern bool sslr_renegotiation_now(bool may_block);
extern void sslr_renegotiation_drive(void);
extern bool sslr_renegotiation_finished(int write_p, int msg_type);
extern void sslr_renegotiation_note_cipher(void);
extern void sslr_renegotiation_alert(int write_p, int level, int description);
extern void sslr_renegotiation_safe_point(int64 record_limit);
extern void sslr_renegotiation_at_exit(int64 record_limit);

/* ending.c */
extern void sslr_defer_termination(SSL *ssl, SslrEndReason reason, int64 amount);
extern void sslr_terminate(SslrDirection dir, SslrEndReason reason);
extern void sslr_limit_skipped(void);
extern void sslr_queue_request_log(void);
extern void sslr_queue_rekey_log(SslrDirection dir, bool peer_initiated,
								 int64 bytes, int64 duration_us);
extern void sslr_ending_safe_point(void);
extern void sslr_ending_at_exit(void);

/* shmem.c */
extern Size sslr_shmem_size(void);
extern void sslr_shmem_request(void);
extern void sslr_shmem_startup(void);
extern bool sslr_shmem_ready(void);
extern void sslr_count_early_record(SslrDirection dir, int64 wire_bytes);
extern void sslr_count(int64 *counter, int64 amount);
extern void sslr_attach_slot(Port *port);
extern bool sslr_publish_userid(void);
extern void sslr_publish_cipher(SSL *ssl);
extern void sslr_publish_rekey_pending(bool pending);
extern void sslr_publish_record_limit(int64 record_limit);
extern void sslr_publish_request(int64 seen, bool pending);
extern bool sslr_request_rekey(int pid);
extern int64 sslr_read_requests(int index);
extern void sslr_read_slot(int index, SslrSlot *copy);
extern int	sslr_slot_count(void);
extern void sslr_read_totals(SslrTotals *totals, bool (*include) (Oid userid));
extern void sslr_reset_totals(void);
extern void sslr_tally_add(SslrTally *dst, const SslrTally *src, int sign);

#endif							/* SSL_RENEGOTIATE_H */

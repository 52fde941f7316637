/*-------------------------------------------------------------------------
 *
 * rekey.c
 *	  When to rotate a connection's keys, and how.
 *
 * Policy: each direction rotates when the bytes sent (or received) under
 * the current key reach ssl_renegotiate.limit, when its records reach the
 * cipher's confidentiality limit (of the cipher in force: a renegotiation
 * may change it), or at the first I/O after ssl_renegotiate.interval, each
 * direction on its own clock.  A direction that carries more than
 * ssl_renegotiate.hard_limit under one key ends the connection.
 *
 * Mechanism:
 *	- TLS 1.3, send side: SSL_key_update(NOT_REQUESTED) at a safe point of
 *	  the wrapped PqCommMethods, between two SSL_write calls.  Never
 *	  REQUESTED there: during COPY TO the server does not read, so the
 *	  peer's answer would pile up until both sides block.
 *	- TLS 1.3, receive side: SSL_key_update(REQUESTED) from the inbound
 *	  record path (inside SSL_read, where it only sets a flag), with at most
 *	  one request outstanding: asking again before the peer answered breaks
 *	  libpq.  The request is made early by the lag last observed between a
 *	  request and its answer, so that the peer's key changes near the limit.
 *	- TLS 1.2: a server-initiated renegotiation, if ssl_renegotiate.tls12
 *	  says so.  PostgreSQL sets SSL_OP_NO_RENEGOTIATION; it is cleared on
 *	  this one connection only while our own renegotiation is in flight, so
 *	  client-initiated renegotiation stays refused.  Session tickets are
 *	  lifted with it, so renegotiations after the first are abbreviated.
 *	  At blocking send points the server drives the handshake itself (in
 *	  COPY TO it would otherwise never read the ClientHello) and finishes
 *	  one in flight before it answers, waiting SSLR_RENEGOTIATION_WAIT_MS
 *	  per attempt at most.  A walsender is never renegotiated (see
 *	  sslr_tls12_action).
 *	- TLS 1.3, unasked KeyUpdates of the peer: bounded by a budget that
 *	  grows with the bytes received and the time (sslr_peer_update_allowed).
 *	- Ending a connection from the inbound path: the TLS connection is
 *	  marked as shut down by the peer (a flag), so OpenSSL processes nothing
 *	  more and the read reports end of connection; the reason is logged at
 *	  exit.
 *
 * Invariants:
 *	- No OpenSSL call from inside a record callback during a write; on the
 *	  read side only calls that set flags (SSL_key_update, SSL_renegotiate,
 *	  option bits, SSL_set_shutdown).
 *	- Nothing that can ereport(ERROR) or allocate inside a callback: what
 *	  needs logging or ending the connection there is deferred to the next
 *	  safe point, to interrupt processing, or to backend exit.
 *	- OpenSSL's error queue is left as it was found (ERR_set_mark /
 *	  ERR_pop_to_mark around every call made here), except around a call
 *	  whose result goes to SSL_get_error: that one starts from an empty
 *	  queue, as PostgreSQL's own reads and writes do.
 *	- Nothing reached from putmessage_noblock or flush_if_writable blocks,
 *	  and each message passes one safe point (PostgreSQL's noblock variant
 *	  calls putmessage through PqCommMethods).
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "libpq/libpq.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "replication/walsender.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include "compat.h"
#include "ssl_renegotiate.h"

/*
 * Confidentiality limits in records per key, with a margin: RFC 8446 5.5
 * gives 2^24.5 full-size records for AES-GCM; RFC 9147 4.5.3 gives 2^23.5
 * for AES-CCM.  ChaCha20-Poly1305 has no practical limit.  Ciphers we do not
 * know get the smallest limit.
 */
#define SSLR_GCM_RECORD_LIMIT	(INT64CONST(1) << 24)
#define SSLR_CCM_RECORD_LIMIT	(INT64CONST(1) << 23)
#define SSLR_NO_LIMIT			PG_INT64_MAX

/* Credit for one unasked key update of the peer: one full-size record. */
#define SSLR_PEER_UPDATE_BYTES	16384

/* How long the send side waits for a client to take part in renegotiation. */
#define SSLR_RENEGOTIATION_WAIT_MS 10000

/*
 * Options PostgreSQL sets that are lifted on this one connection while our
 * own renegotiation runs: renegotiation itself, and session tickets, so
 * that the first renegotiation (a full handshake) hands the client a ticket
 * and the later ones resume it (an abbreviated handshake: new keys from the
 * same master secret and fresh randoms, like a TLS 1.3 KeyUpdate, at a
 * fraction of the cost).  New connections still get neither: the context
 * keeps both options.
 */
static uint64 sslr_window_options = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET;

/* Rekeys waiting to be logged at the next safe point. */
#define SSLR_LOG_QUEUE 16

/* Why a limit ends a connection. */
typedef enum SslrEndReason
{
	SSLR_END_NONE,
	SSLR_END_HARD_LIMIT,		/* ssl_renegotiate.hard_limit */
	SSLR_END_TLS12,				/* ssl_renegotiate.tls12 = terminate */
	SSLR_END_KEY_UPDATE_FLOOD	/* ssl_renegotiate.max_peer_key_updates */
} SslrEndReason;

typedef struct SslrRekeyLog
{
	SslrDirection dir;
	bool		peer_initiated;
	int64		bytes_under_old_key;
	int64		duration_us;
} SslrRekeyLog;

/* Thresholds the record path compares with; PG_INT64_MAX means "never". */
volatile int64 sslr_attention_bytes[SSLR_NDIRECTIONS] = {SSLR_NO_LIMIT, SSLR_NO_LIMIT};
volatile int64 sslr_attention_records[SSLR_NDIRECTIONS] = {SSLR_NO_LIMIT, SSLR_NO_LIMIT};

/* This backend's connection, once authenticated. */
static Port *sslr_port = NULL;
static SSL *sslr_ssl = NULL;
static bool sslr_tls13 = false;
static int64 sslr_cipher_record_limit = SSLR_NO_LIMIT;

/* PqCommMethods wrapper. */
static const PQcommMethods *sslr_prev_comm = NULL;
static PQcommMethods sslr_comm;
static bool sslr_in_send_point = false;
static bool sslr_in_noblock = false;

/* Receive side: our one outstanding request to the peer. */
static int64 sslr_request_at_bytes = 0;
static TimestampTz sslr_request_time = 0;
static int64 sslr_peer_lag = 0;

/* Receive side: the budget of key updates the peer sends unasked. */
static int64 sslr_peer_update_credit = 0;
static int64 sslr_peer_update_bytes = 0;
static TimestampTz sslr_peer_update_time = 0;
static int64 sslr_peer_updates_unasked = 0;

/* Interval: the timer raises a flag, the safe points look at the clocks. */
static TimeoutId sslr_timeout_id = MAX_TIMEOUTS;
static volatile sig_atomic_t sslr_interval_due = false;
static bool sslr_interval_expired[SSLR_NDIRECTIONS];
static TimestampTz sslr_key_since[SSLR_NDIRECTIONS];

/* Directions that may not try again until their key changes. */
static bool sslr_rotation_blocked[SSLR_NDIRECTIONS];

/* TLS 1.2 state. */
static bool sslr_tls12_warned = false;
static bool sslr_renegotiating = false;
static int	sslr_finished_seen = 0;
static bool sslr_verify_peer_pending = false;
static bool sslr_peer_refused_renegotiation = false;
static bool sslr_renegotiation_waited = false;	/* this attempt's wait is over */
static bool sslr_renegotiation_unanswered = false;	/* to be logged */
static TimestampTz sslr_renegotiation_deadline = 0;
static bool sslr_cipher_change_pending = false;
static char sslr_previous_cipher[SSLR_CIPHER_LEN];

/* Our own send-side rekey in progress, for its duration. */
static instr_time sslr_send_rekey_start;
static bool sslr_send_rekey_timing = false;

/* Deferred work: logs and a termination decided on the inbound path. */
static SslrRekeyLog sslr_log_queue[SSLR_LOG_QUEUE];
static int	sslr_log_queued = 0;
static int64 sslr_log_dropped = 0;
static bool sslr_warn_pending = false;
static SslrEndReason sslr_deferred_termination = SSLR_END_NONE;
static int64 sslr_deferred_termination_bytes = 0;
static bool sslr_deferred_work = false;
static bool sslr_userid_pending = false;

static void sslr_recompute(void);

/* ---------------------------------------------------------------------
 * Slot updates (owner only, under the change count)
 * ---------------------------------------------------------------------
 */
static void
sslr_set_rekey_pending(bool pending)
{
	SslrSlot   *slot = sslr_my_slot;

	SSLR_BEGIN_WRITE(slot);
	slot->stats.rekey_pending = pending;
	SSLR_END_WRITE(slot);
}

/* ---------------------------------------------------------------------
 * Policy
 * ---------------------------------------------------------------------
 */
static int64
sslr_limit_bytes(void)
{
	return (int64) sslr_limit_kb * 1024;
}

static int64
sslr_hard_limit_bytes(void)
{
	return (int64) sslr_hard_limit_kb * 1024;
}

static int64
sslr_cipher_limit_for(const SSL *ssl)
{
	const SSL_CIPHER *cipher = SSL_get_current_cipher(ssl);
	int			nid;

	if (cipher == NULL)
		return SSLR_CCM_RECORD_LIMIT;
	nid = SSL_CIPHER_get_cipher_nid(cipher);
	if (nid == NID_aes_128_gcm || nid == NID_aes_256_gcm)
		return SSLR_GCM_RECORD_LIMIT;
	if (nid == NID_chacha20_poly1305)
		return SSLR_NO_LIMIT;
	return SSLR_CCM_RECORD_LIMIT;
}

/*
 * What a TLS 1.2 limit does on this connection.  A walsender is never
 * renegotiated: it writes without blocking and reads its standby's replies
 * while a write may still be pending, and OpenSSL cannot run a handshake
 * across a pending write (the handshake's first write fails with "bad write
 * retry", and the connection with it).  It carries on as under "warn".
 */
static SslrTls12Policy
sslr_tls12_action(void)
{
	if (sslr_tls12_policy == SSLR_TLS12_RENEGOTIATE && am_walsender)
		return SSLR_TLS12_WARN;
	return (SslrTls12Policy) sslr_tls12_policy;
}

/* Can this direction try to rotate now? */
static bool
sslr_may_rotate(SslrDirection dir)
{
	if (sslr_rotation_blocked[dir])
		return false;
	if (sslr_tls13)
		return dir == SSLR_SENT || !sslr_my_slot->stats.rekey_pending;
	if (sslr_renegotiating)
		return false;
	return !(sslr_tls12_action() == SSLR_TLS12_WARN && sslr_tls12_warned);
}

/* Bytes under the current key at which this direction should act. */
static int64
sslr_rotation_trigger(SslrDirection dir)
{
	int64		limit = sslr_limit_bytes();

	if (limit <= 0)
		return SSLR_NO_LIMIT;

	/*
	 * A TLS 1.3 peer answers our request only after its own pending writes
	 * drain; ask that much earlier so its key changes near the limit.
	 */
	if (dir == SSLR_RECEIVED && sslr_tls13)
		return limit > sslr_peer_lag ? limit - sslr_peer_lag : 0;
	return limit;
}

static bool
sslr_rotation_due(SslrDirection dir)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;

	return stats->bytes_under_key[dir] >= sslr_rotation_trigger(dir) ||
		stats->records_under_key[dir] >= sslr_cipher_record_limit ||
		sslr_interval_expired[dir];
}

static void
sslr_recompute(void)
{
	int64		hard = sslr_hard_limit_bytes();

	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		int64		bytes = hard > 0 ? hard + 1 : SSLR_NO_LIMIT;
		int64		records = SSLR_NO_LIMIT;

		if (sslr_ssl == NULL)
			bytes = SSLR_NO_LIMIT;
		else if (sslr_may_rotate(dir))
		{
			bytes = Min(bytes, sslr_rotation_trigger(dir));
			records = sslr_cipher_record_limit;
			if (sslr_interval_expired[dir])
				bytes = 0;
		}
		sslr_attention_bytes[dir] = bytes;
		sslr_attention_records[dir] = records;
	}

	/* the timer may have fired while we computed */
	if (sslr_interval_due)
		sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

/* Settings changed: make both paths re-evaluate at their next I/O. */
void
sslr_rekey_policy_changed(void)
{
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

/* ---------------------------------------------------------------------
 * Interval timer
 * ---------------------------------------------------------------------
 */
static void
sslr_interval_timeout(void)
{
	/* signal handler: flags only */
	sslr_interval_due = true;
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

/*
 * Find which directions' keys have outlived the interval and arm the timer
 * for the next one to do so.
 */
static void
sslr_check_interval(void)
{
	TimestampTz now;
	TimestampTz next = 0;
	int64		interval_ms = (int64) sslr_interval_s * 1000;

	if (sslr_interval_s <= 0 || sslr_timeout_id == MAX_TIMEOUTS)
	{
		sslr_interval_due = false;
		sslr_interval_expired[SSLR_SENT] = sslr_interval_expired[SSLR_RECEIVED] = false;
		if (sslr_timeout_id != MAX_TIMEOUTS && get_timeout_active(sslr_timeout_id))
			disable_timeout(sslr_timeout_id, false);
		return;
	}

	sslr_interval_due = false;
	now = GetCurrentTimestamp();
	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		TimestampTz expiry = TimestampTzPlusMilliseconds(sslr_key_since[dir], interval_ms);

		if (expiry <= now)
			sslr_interval_expired[dir] = true;
		else if (next == 0 || expiry < next)
			next = expiry;
	}
	if (next != 0)
		enable_timeout_at(sslr_timeout_id, next);
	else if (get_timeout_active(sslr_timeout_id))
		disable_timeout(sslr_timeout_id, false);
}

static void sslr_log_deferred_termination(void);
static void sslr_termination_at_exit(int code, Datum arg);

/*
 * End the session from the inbound record path, where we can neither block
 * nor ereport.  Marking the TLS connection as shut down by the peer (a flag
 * only) makes OpenSSL process nothing more of what is waiting in the
 * socket, and the read report end of connection: a backend in the middle of
 * a message, or of a COPY, ends as if the client had gone, rolling back.
 * The next CHECK_FOR_INTERRUPTS ends an idle one as a lost connection, and
 * the latch wakes it.  Nothing more is sent to this client; the reason is
 * logged at exit.
 */
static void
sslr_end_connection(SSL *ssl)
{
	SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
	if (sslr_ssl == NULL)
	{
		/* before authentication: no slot, so say it from our own callback */
		on_proc_exit(sslr_termination_at_exit, (Datum) 0);
		return;
	}
	InterruptPending = true;
	ClientConnectionLost = true;
	SetLatch(MyLatch);
}

/* ---------------------------------------------------------------------
 * Events reported by accounting.c
 * ---------------------------------------------------------------------
 */
static void
sslr_queue_log(SslrDirection dir, bool peer_initiated, int64 bytes, int64 duration_us)
{
	if (!sslr_log_rekeys)
		return;
	if (sslr_log_queued >= SSLR_LOG_QUEUE)
	{
		sslr_log_dropped++;
		return;
	}
	sslr_log_queue[sslr_log_queued].dir = dir;
	sslr_log_queue[sslr_log_queued].peer_initiated = peer_initiated;
	sslr_log_queue[sslr_log_queued].bytes_under_old_key = bytes;
	sslr_log_queue[sslr_log_queued].duration_us = duration_us;
	sslr_log_queued++;
	sslr_deferred_work = true;
}

/* One direction's key changed: retire the old key's counters. */
static void
sslr_retire_key(SslrDirection dir, TimestampTz now, bool peer_initiated,
				int64 duration_us)
{
	SslrSlot   *slot = sslr_my_slot;
	SslrConnStats *stats = &slot->stats;
	int64		bytes = stats->bytes_under_key[dir];

	sslr_count(&stats->tally.rekeys[dir], 1);
	SSLR_BEGIN_WRITE(slot);
	if (bytes > stats->max_bytes_per_key[dir])
		stats->max_bytes_per_key[dir] = bytes;
	stats->bytes_under_key[dir] = 0;
	stats->records_under_key[dir] = 0;
	stats->last_rekey = now;
	SSLR_END_WRITE(slot);

	sslr_key_since[dir] = now;
	sslr_interval_expired[dir] = false;
	sslr_rotation_blocked[dir] = false;
	sslr_queue_log(dir, peer_initiated, bytes, duration_us);

	/*
	 * The timer may be off (both keys had outlived the interval) or set for
	 * the other key: have the next I/O in either direction set it again.
	 */
	if (sslr_interval_s > 0)
		sslr_interval_due = true;
}

/*
 * May the peer make us derive one more key, unasked?  A token bucket: it
 * holds up to ssl_renegotiate.max_peer_key_updates updates and starts full;
 * each unasked update takes one, and one comes back for every
 * SSLR_PEER_UPDATE_BYTES received and every second.  So however a peer
 * interleaves its records, the keys it makes us derive stay within
 * max_peer_key_updates + bytes received / 16 kB + seconds connected, while
 * a client rotating every 64 kB, or on a timer of a second or more, never
 * runs dry.  Credit is kept in bytes' worth.
 */
static bool
sslr_peer_update_allowed(const SslrConnStats *stats, TimestampTz now)
{
	int64		capacity = (int64) sslr_max_peer_key_updates * SSLR_PEER_UPDATE_BYTES;
	int64		received = stats->tally.bytes[SSLR_RECEIVED];

	if (sslr_max_peer_key_updates <= 0)
		return true;

	if (sslr_peer_update_time == 0)
		sslr_peer_update_credit = capacity;
	else
	{
		int64		elapsed = Max(now - sslr_peer_update_time, 0);
		int64		earned = received - sslr_peer_update_bytes;

		earned += (elapsed / USECS_PER_SEC) * SSLR_PEER_UPDATE_BYTES +
			(elapsed % USECS_PER_SEC) * SSLR_PEER_UPDATE_BYTES / USECS_PER_SEC;
		sslr_peer_update_credit = Min(capacity, sslr_peer_update_credit + earned);
	}
	sslr_peer_update_bytes = received;
	sslr_peer_update_time = now;

	if (sslr_peer_update_credit < SSLR_PEER_UPDATE_BYTES)
		return false;
	sslr_peer_update_credit -= SSLR_PEER_UPDATE_BYTES;
	return true;
}

/*
 * A KeyUpdate went out (dir == SENT: our sending key changed) or came in
 * (RECEIVED: the peer's sending key changed).  Counted and bounded before
 * authentication too: a peer may send KeyUpdates as soon as the handshake
 * is over.
 */
void
sslr_key_rotated(SSL *ssl, SslrDirection dir)
{
	SslrConnStats *stats = &sslr_my_slot->stats;
	TimestampTz now = GetCurrentTimestamp();
	int64		duration_us = 0;
	bool		peer_initiated = false;

	if (dir == SSLR_SENT && sslr_send_rekey_timing)
	{
		instr_time	elapsed;

		INSTR_TIME_SET_CURRENT(elapsed);
		INSTR_TIME_SUBTRACT(elapsed, sslr_send_rekey_start);
		duration_us = INSTR_TIME_GET_MICROSEC(elapsed);
	}
	else if (dir == SSLR_RECEIVED && stats->rekey_pending)
	{
		/* the answer to our request: learn how late peers answer */
		sslr_peer_lag = stats->tally.bytes[SSLR_RECEIVED] - sslr_request_at_bytes;
		duration_us = now - sslr_request_time;
		sslr_set_rekey_pending(false);
	}
	else if (dir == SSLR_RECEIVED)
	{
		peer_initiated = true;
		sslr_peer_updates_unasked++;
		if (!sslr_peer_update_allowed(stats, now) &&
			sslr_deferred_termination == SSLR_END_NONE)
		{
			sslr_deferred_termination = SSLR_END_KEY_UPDATE_FLOOD;
			sslr_deferred_termination_bytes = sslr_peer_updates_unasked;
			sslr_count(&stats->tally.terminations, 1);
			sslr_end_connection(ssl);
		}
	}

	sslr_retire_key(dir, now, peer_initiated, duration_us);
	if (sslr_ssl != NULL)
		sslr_recompute();
}

/*
 * A full renegotiation may have agreed on another cipher: from now on its
 * record limit applies, and the slot shows it.  Said at the next safe
 * point, since this runs inside OpenSSL.
 */
static void
sslr_cipher_in_force(void)
{
	const char *cipher = SSL_get_cipher_name(sslr_ssl);

	sslr_cipher_record_limit = sslr_cipher_limit_for(sslr_ssl);
	if (strcmp(cipher, sslr_my_slot->cipher) == 0)
		return;
	strlcpy(sslr_previous_cipher, sslr_my_slot->cipher, sizeof(sslr_previous_cipher));
	sslr_publish_cipher(sslr_ssl);
	sslr_cipher_change_pending = true;
	sslr_deferred_work = true;
}

/* Our TLS 1.2 renegotiation finished: both directions have new keys. */
static void
sslr_renegotiation_done(void)
{
	TimestampTz now = GetCurrentTimestamp();

	SSL_set_options(sslr_ssl, sslr_window_options);
	sslr_renegotiating = false;
	sslr_verify_peer_pending = true;
	sslr_deferred_work = true;
	sslr_set_rekey_pending(false);
	sslr_retire_key(SSLR_SENT, now, false, 0);
	sslr_retire_key(SSLR_RECEIVED, now, false, 0);
	sslr_cipher_in_force();
	sslr_recompute();
}

void
sslr_renegotiation_message(int write_p, int msg_type)
{
	if (sslr_ssl == NULL || sslr_tls13 || !sslr_renegotiating)
		return;

	/* done when both Finished messages have passed, in either order */
	if (msg_type == SSL3_MT_FINISHED)
	{
		sslr_finished_seen |= write_p ? 1 : 2;
		if (sslr_finished_seen == 3)
			sslr_renegotiation_done();
	}
}

void
sslr_alert(int write_p, int level, int description)
{
	if (description != SSL_AD_NO_RENEGOTIATION)
		return;

	if (write_p && level == SSL3_AL_WARNING)
	{
		/* OpenSSL refused a client-initiated renegotiation for us */
		sslr_count(&sslr_my_slot->stats.tally.peer_renegotiations_refused, 1);
	}
	else if (!write_p && sslr_renegotiating)
	{
		/* the client refused ours; OpenSSL ends the connection */
		sslr_peer_refused_renegotiation = true;
		sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
	}
}

/* ---------------------------------------------------------------------
 * Actions
 * ---------------------------------------------------------------------
 */

/* Is this OpenSSL error a "not now, try at the next safe point"? */
static bool
sslr_transient_error(unsigned long ecode)
{
	int			reason = ERR_GET_REASON(ecode);

	return reason == SSL_R_BAD_WRITE_RETRY || reason == SSL_R_STILL_IN_INIT;
}

/* A rotation attempt failed for good: count it, retry after the next key. */
static void
sslr_rotation_failed(SslrDirection dir)
{
	sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
	sslr_rotation_blocked[dir] = true;
}

/* TLS 1.3, receive side: ask the peer to update its key (one at a time). */
static void
sslr_request_peer_update(SSL *ssl)
{
	unsigned long ecode = 0;
	int			ok;

	ERR_set_mark();
	ok = SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED);
	if (!ok)
		ecode = ERR_peek_last_error();
	ERR_pop_to_mark();

	if (ok)
	{
		sslr_request_at_bytes = sslr_my_slot->stats.tally.bytes[SSLR_RECEIVED];
		sslr_request_time = GetCurrentTimestamp();
		sslr_set_rekey_pending(true);
	}
	else if (!sslr_transient_error(ecode))
		sslr_rotation_failed(SSLR_RECEIVED);
}

/* TLS 1.3, send side, at a safe point: rotate our key now. */
static void
sslr_send_key_update(void)
{
	unsigned long ecode = 0;
	int			ok;
	instr_time	elapsed;

	INSTR_TIME_SET_CURRENT(sslr_send_rekey_start);
	sslr_send_rekey_timing = true;

	ERR_set_mark();
	ok = SSL_key_update(sslr_ssl, SSL_KEY_UPDATE_NOT_REQUESTED);
	if (ok)
	{
		/*
		 * Send it now rather than ahead of the next write, so that what is
		 * buffered goes out under the new key.  If the socket is full the
		 * message stays queued in OpenSSL and the next SSL call sends it.
		 */
		(void) SSL_do_handshake(sslr_ssl);
	}
	else
		ecode = ERR_peek_last_error();
	ERR_pop_to_mark();

	sslr_send_rekey_timing = false;
	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, sslr_send_rekey_start);

	if (ok)
		sslr_count(&sslr_my_slot->stats.tally.rekey_time_us,
				   INSTR_TIME_GET_MICROSEC(elapsed));
	else if (!sslr_transient_error(ecode))
		sslr_rotation_failed(SSLR_SENT);
}

/*
 * TLS 1.2: start a renegotiation.  Only flags are set here, so this may run
 * on the inbound record path; the HelloRequest goes out with the next SSL
 * call.
 */
static bool
sslr_start_renegotiation(SSL *ssl)
{
	int			ok;

	ERR_set_mark();
	SSL_clear_options(ssl, sslr_window_options);
	ok = SSL_renegotiate(ssl);
	if (!ok)
		SSL_set_options(ssl, sslr_window_options);
	ERR_pop_to_mark();

	if (!ok)
		return false;
	sslr_renegotiating = true;
	sslr_renegotiation_waited = false;
	sslr_renegotiation_deadline = 0;
	sslr_finished_seen = 0;
	sslr_set_rekey_pending(true);
	return true;
}

/*
 * TLS 1.2, at a blocking safe point, with our renegotiation in flight: read
 * the client's handshake ourselves, since during COPY TO nothing else would,
 * and finish it before the next message goes out (a client that answers the
 * HelloRequest late, as JSSE does after COPY IN, would otherwise interleave
 * its next query with its handshake, which OpenSSL rejects).  Stop early if
 * application data is waiting (the handshake then finishes in PostgreSQL's
 * own reads).
 *
 * Each attempt waits SSLR_RENEGOTIATION_WAIT_MS in all, however many safe
 * points it spans.  A client may ignore a HelloRequest (RFC 5246 7.4.1.1):
 * once that time is spent the attempt counts as failed and no safe point
 * waits for it again, but the window stays open, so a late answer still
 * completes the renegotiation.  A handshake that fails has killed the
 * connection: say why.
 */
static void
sslr_drive_renegotiation(void)
{
	instr_time	start;
	instr_time	elapsed;
	bool		failed = false;
	unsigned long ecode = 0;

	if (sslr_renegotiation_waited)
		return;

	INSTR_TIME_SET_CURRENT(start);
	if (sslr_renegotiation_deadline == 0)
		sslr_renegotiation_deadline =
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										SSLR_RENEGOTIATION_WAIT_MS);
	while (sslr_renegotiating && !sslr_peer_refused_renegotiation)
	{
		char		peek;
		int			r;
		int			err;
		int			waitfor;
		long		remaining;

		/*
		 * SSL_get_error reads the error queue: start from an empty one, as
		 * PostgreSQL's own reads and writes do, so that another library's
		 * leftover is not taken for ours.
		 */
		ERR_clear_error();
		r = SSL_peek(sslr_ssl, &peek, 1);
		err = SSL_get_error(sslr_ssl, r);
		if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL)
			ecode = ERR_peek_last_error();
		ERR_clear_error();

		if (r > 0 || !sslr_renegotiating)
			break;
		if (err == SSL_ERROR_WANT_READ)
			waitfor = WL_SOCKET_READABLE;
		else if (err == SSL_ERROR_WANT_WRITE)
			waitfor = WL_SOCKET_WRITEABLE;
		else
		{
			failed = true;
			break;
		}

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													sslr_renegotiation_deadline);
		if (remaining <= 0)
		{
			sslr_renegotiation_waited = true;
			sslr_renegotiation_unanswered = true;
			sslr_deferred_work = true;
			sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
			break;
		}
		if (WaitLatchOrSocket(MyLatch, waitfor | WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							  sslr_port->sock, remaining, WAIT_EVENT_SSL_OPEN_SERVER) & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}

	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, start);
	sslr_count(&sslr_my_slot->stats.tally.rekey_time_us,
			   INSTR_TIME_GET_MICROSEC(elapsed));

	if (sslr_peer_refused_renegotiation)
	{
		sslr_peer_refused_renegotiation = false;	/* said here, not at exit */
		ereport(FATAL,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("client refused TLS renegotiation"),
				 errdetail("ssl_renegotiate.tls12 is \"renegotiate\" and the client answered with a no_renegotiation alert."),
				 errhint("Set ssl_renegotiate.tls12 to \"warn\" for clients that cannot renegotiate, or have them use TLS 1.3.")));
	}
	if (failed)
	{
		const char *reason = ecode ? ERR_reason_error_string(ecode) : NULL;

		sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
		ereport(FATAL,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("TLS renegotiation failed: %s",
						reason ? reason : "connection lost")));
	}
}

/* TLS 1.2, send side, at a safe point: start a renegotiation. */
static void
sslr_renegotiate_now(bool may_block)
{
	if (!sslr_start_renegotiation(sslr_ssl))
	{
		sslr_rotation_failed(SSLR_SENT);
		return;
	}

	ERR_set_mark();
	(void) SSL_do_handshake(sslr_ssl);	/* sends the HelloRequest */
	ERR_pop_to_mark();

	if (may_block)
		sslr_drive_renegotiation();
}

/* End the connection from a safe point, with the reason. */
static void
sslr_terminate(SslrDirection dir, SslrEndReason reason)
{
	int64		bytes = sslr_my_slot->stats.bytes_under_key[dir];

	sslr_count(&sslr_my_slot->stats.tally.terminations, 1);
	if (reason == SSLR_END_TLS12)
		ereport(FATAL,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("terminating connection because its TLS 1.2 keys reached ssl_renegotiate.limit"),
				 errdetail("%lld bytes were %s under one key; ssl_renegotiate.tls12 is \"terminate\".",
						   (long long) bytes, dir == SSLR_SENT ? "sent" : "received"),
				 errhint("Connect with TLS 1.3, or change ssl_renegotiate.tls12.")));
	ereport(FATAL,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("terminating connection because more than ssl_renegotiate.hard_limit was %s under one TLS key",
					dir == SSLR_SENT ? "sent" : "received"),
			 errdetail("%lld bytes under one key; ssl_renegotiate.hard_limit is %d kB.",
					   (long long) bytes, sslr_hard_limit_kb)));
}

/*
 * A limit was reached on the inbound path, where we may neither block nor
 * ereport: decide, and defer what cannot be done here.
 */
static void
sslr_defer_termination(SSL *ssl, SslrEndReason reason)
{
	if (sslr_deferred_termination != SSLR_END_NONE)
		return;
	sslr_deferred_termination = reason;
	sslr_deferred_termination_bytes = sslr_my_slot->stats.bytes_under_key[SSLR_RECEIVED];
	sslr_count(&sslr_my_slot->stats.tally.terminations, 1);
	sslr_end_connection(ssl);
}

static void
sslr_limit_skipped(void)
{
	if (sslr_tls12_warned)
		return;
	sslr_tls12_warned = true;
	sslr_warn_pending = true;
	sslr_deferred_work = true;
	sslr_count(&sslr_my_slot->stats.tally.rekeys_skipped, 1);
}

/* Inbound record path: a threshold was crossed, or the policy changed. */
void
sslr_receive_attention(SSL *ssl)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;
	int64		hard = sslr_hard_limit_bytes();

	if (sslr_ssl == NULL || ssl != sslr_ssl)
	{
		/* not yet authenticated: nothing may happen before attach */
		return;
	}

	if (sslr_interval_due)
		sslr_check_interval();

	if (hard > 0 && stats->bytes_under_key[SSLR_RECEIVED] > hard)
		sslr_defer_termination(ssl, SSLR_END_HARD_LIMIT);
	else if (sslr_may_rotate(SSLR_RECEIVED) && sslr_rotation_due(SSLR_RECEIVED))
	{
		if (sslr_tls13)
			sslr_request_peer_update(ssl);
		else if (sslr_tls12_action() == SSLR_TLS12_RENEGOTIATE)
		{
			if (sslr_start_renegotiation(ssl))
				sslr_deferred_work = true;	/* finish it before we answer */
			else
				sslr_rotation_failed(SSLR_RECEIVED);
		}
		else if (sslr_tls12_action() == SSLR_TLS12_WARN)
			sslr_limit_skipped();
		else
			sslr_defer_termination(ssl, SSLR_END_TLS12);
	}
	sslr_recompute();
}

/* ---------------------------------------------------------------------
 * Safe points: the wrapped PqCommMethods
 * ---------------------------------------------------------------------
 */
static void
sslr_flush_deferred_logs(void)
{
	for (int i = 0; i < sslr_log_queued; i++)
	{
		SslrRekeyLog *entry = &sslr_log_queue[i];

		if (entry->dir == SSLR_SENT)
			ereport(LOG_SERVER_ONLY,
					(errmsg("ssl_renegotiate: rotated the sending key of pid %d after %lld bytes in %.3f ms",
							MyProcPid, (long long) entry->bytes_under_old_key,
							entry->duration_us / 1000.0),
					 errhidestmt(true), errhidecontext(true)));
		else
			ereport(LOG_SERVER_ONLY,
					(errmsg("ssl_renegotiate: client of pid %d rotated its sending key after %lld bytes%s, %.3f ms after the request",
							MyProcPid, (long long) entry->bytes_under_old_key,
							entry->peer_initiated ? " (unrequested)" : "",
							entry->duration_us / 1000.0),
					 errhidestmt(true), errhidecontext(true)));
	}
	if (sslr_log_dropped > 0)
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: %lld more rekeys of pid %d were not logged",
						(long long) sslr_log_dropped, MyProcPid),
				 errhidestmt(true), errhidecontext(true)));
	sslr_log_queued = 0;
	sslr_log_dropped = 0;
}

static void
sslr_verify_peer_unchanged(void)
{
	X509	   *now = sslr_get1_peer_certificate(sslr_ssl);
	bool		same;

	/*
	 * With SSL_VERIFY_CLIENT_ONCE a full renegotiation asks for no
	 * certificate, so none is fine; a different one is not.
	 */
	same = now == NULL ||
		(sslr_port->peer != NULL && X509_cmp(now, sslr_port->peer) == 0);
	if (now)
		X509_free(now);
	if (!same)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("client certificate changed during TLS renegotiation")));
}

static void
sslr_log_cipher_change(void)
{
	char		limit[64];

	if (sslr_cipher_record_limit == SSLR_NO_LIMIT)
		strlcpy(limit, "no record limit", sizeof(limit));
	else
		snprintf(limit, sizeof(limit), "a new key every %lld records at most",
				 (long long) sslr_cipher_record_limit);
	ereport(LOG_SERVER_ONLY,
			(errmsg("ssl_renegotiate: TLS renegotiation of pid %d changed the cipher from %s to %s",
					MyProcPid, sslr_previous_cipher, sslr_my_slot->cipher),
			 errdetail("The new cipher's confidentiality limit applies: %s.", limit),
			 errhidestmt(true), errhidecontext(true)));
}

static void
sslr_log_renegotiation_unanswered(void)
{
	ereport(LOG_SERVER_ONLY,
			(errmsg("ssl_renegotiate: client of pid %d did not answer the TLS renegotiation request within %d ms; the connection goes on under its current keys",
					MyProcPid, SSLR_RENEGOTIATION_WAIT_MS),
			 errdetail("The server waits for it no more; the client may still answer later."),
			 errhidestmt(true), errhidecontext(true)));
}

static void
sslr_deferred(void)
{
	sslr_deferred_work = false;
	if (sslr_userid_pending)
	{
		sslr_userid_pending = !sslr_publish_userid();
		sslr_deferred_work |= sslr_userid_pending;
	}
	if (sslr_log_queued > 0 || sslr_log_dropped > 0)
		sslr_flush_deferred_logs();
	if (sslr_warn_pending && sslr_tls12_policy == SSLR_TLS12_RENEGOTIATE)
	{
		sslr_warn_pending = false;
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: TLS 1.2 walsender of pid %d reached ssl_renegotiate.limit and goes on under its current keys",
						MyProcPid),
				 errdetail("A walsender is never renegotiated: it writes without blocking, and OpenSSL cannot renegotiate across a pending write; this is logged once per connection."),
				 errhint("Use TLS 1.3 for replication connections, or set ssl_renegotiate.tls12 to \"terminate\"."),
				 errhidestmt(true), errhidecontext(true)));
	}
	if (sslr_warn_pending)
	{
		sslr_warn_pending = false;
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: TLS 1.2 connection of pid %d reached ssl_renegotiate.limit and goes on under its current keys",
						MyProcPid),
				 errdetail("ssl_renegotiate.tls12 is \"warn\"; this is logged once per connection."),
				 errhidestmt(true), errhidecontext(true)));
	}
	if (sslr_cipher_change_pending)
	{
		sslr_cipher_change_pending = false;
		sslr_log_cipher_change();
	}
	if (sslr_renegotiation_unanswered)
	{
		sslr_renegotiation_unanswered = false;
		sslr_log_renegotiation_unanswered();
	}
	if (sslr_verify_peer_pending)
	{
		sslr_verify_peer_pending = false;
		sslr_verify_peer_unchanged();
	}
}

static void
sslr_send_point_slow(bool may_block)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;
	int64		hard = sslr_hard_limit_bytes();

	if (sslr_in_send_point || proc_exit_inprogress)
		return;
	sslr_in_send_point = true;
	PG_TRY();
	{
		if (sslr_deferred_work)
			sslr_deferred();
		if (sslr_interval_due)
			sslr_check_interval();

		if (hard > 0 && stats->bytes_under_key[SSLR_SENT] > hard)
			sslr_terminate(SSLR_SENT, SSLR_END_HARD_LIMIT);
		else if (sslr_may_rotate(SSLR_SENT) && sslr_rotation_due(SSLR_SENT))
		{
			if (sslr_tls13)
				sslr_send_key_update();
			else if (sslr_tls12_action() == SSLR_TLS12_RENEGOTIATE)
				sslr_renegotiate_now(may_block);
			else if (sslr_tls12_action() == SSLR_TLS12_WARN)
				sslr_limit_skipped();
			else
				sslr_terminate(SSLR_SENT, SSLR_END_TLS12);
		}
		if (sslr_deferred_work)
			sslr_deferred();

		/* one started on the inbound path, or one that was cut short */
		if (sslr_renegotiating && may_block)
			sslr_drive_renegotiation();
		if (sslr_renegotiating && !sslr_renegotiation_waited)
			sslr_deferred_work = true;	/* look again at the next point */
		sslr_recompute();
	}
	PG_FINALLY();
	{
		sslr_in_send_point = false;
	}
	PG_END_TRY();
}

static inline void
sslr_send_point(bool may_block)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;

	if (unlikely(stats->bytes_under_key[SSLR_SENT] >= sslr_attention_bytes[SSLR_SENT] ||
				 stats->records_under_key[SSLR_SENT] >= sslr_attention_records[SSLR_SENT] ||
				 sslr_deferred_work))
		sslr_send_point_slow(may_block);

	/* error recovery disarms every timeout; re-arm ours */
	if (unlikely(sslr_interval_s > 0) && !sslr_interval_due &&
		!get_timeout_active(sslr_timeout_id))
		sslr_check_interval();
}

/*
 * Once a send has failed, PostgreSQL marks the connection lost but may
 * still try to send the error about it.  OpenSSL keeps the failed record
 * pending and rejects a retry with a shorter buffer ("SSL error: bad
 * length"), so a lost connection gets no more writes.  The peer is gone:
 * nothing it could read is lost.  This matters to us because a client
 * killed with our KeyUpdate request unread answers with a RST, which makes
 * the first write fail instead of the second.
 */
static inline bool
sslr_connection_lost(void)
{
	return unlikely(ClientConnectionLost);
}

static int
sslr_comm_flush(void)
{
	if (sslr_connection_lost())
		return EOF;
	sslr_send_point(true);
	return sslr_prev_comm->flush();
}

static int
sslr_comm_flush_if_writable(void)
{
	if (sslr_connection_lost())
		return EOF;
	sslr_send_point(false);
	return sslr_prev_comm->flush_if_writable();
}

static int
sslr_comm_putmessage(char msgtype, const char *s, size_t len)
{
	if (sslr_connection_lost())
		return EOF;
	if (likely(!sslr_in_noblock))
		sslr_send_point(true);
	return sslr_prev_comm->putmessage(msgtype, s, len);
}

/*
 * PostgreSQL's putmessage_noblock makes room in its buffer and then calls
 * putmessage through PqCommMethods: that inner call is the same message,
 * already past its (non-blocking) safe point.
 */
static void
sslr_comm_putmessage_noblock(char msgtype, const char *s, size_t len)
{
	if (sslr_connection_lost())
		return;
	sslr_send_point(false);
	sslr_in_noblock = true;
	PG_TRY();
	{
		sslr_prev_comm->putmessage_noblock(msgtype, s, len);
	}
	PG_FINALLY();
	{
		sslr_in_noblock = false;
	}
	PG_END_TRY();
}

/* ---------------------------------------------------------------------
 * Start and end of a connection
 * ---------------------------------------------------------------------
 */

/*
 * Renegotiations after the first resume the session they created (see
 * sslr_window_options).  OpenSSL resumes a session of a server
 * that verifies client certificates only within a session id context; make
 * it this connection's own, so that a ticket is good on no other one.
 */
static void
sslr_set_session_id_context(SSL *ssl)
{
	unsigned char context[SSL_MAX_SID_CTX_LENGTH];
	int64		start = (int64) MyStartTimestamp;
	int32		pid = MyProcPid;

	StaticAssertStmt(sizeof(start) + sizeof(pid) <= SSL_MAX_SID_CTX_LENGTH,
					 "session id context too small");
	memcpy(context, &pid, sizeof(pid));
	memcpy(context + sizeof(pid), &start, sizeof(start));

	ERR_set_mark();
	if (!SSL_set_session_id_context(ssl, context, sizeof(pid) + sizeof(start)))
		sslr_window_options = SSL_OP_NO_RENEGOTIATION;	/* full handshakes, then */
	ERR_pop_to_mark();
}

/* The connection is authenticated: start enforcing on it. */
void
sslr_rekey_start(Port *port)
{
	TimestampTz now = GetCurrentTimestamp();

	if (sslr_ssl != NULL)
		return;

	sslr_port = port;
	sslr_ssl = port->ssl;
	sslr_tls13 = SSL_version(port->ssl) >= TLS1_3_VERSION;
	sslr_cipher_record_limit = sslr_cipher_limit_for(port->ssl);
	sslr_key_since[SSLR_SENT] = sslr_key_since[SSLR_RECEIVED] = now;

	if (!sslr_tls13)
		sslr_set_session_id_context(port->ssl);

	sslr_prev_comm = PqCommMethods;
	sslr_comm = *PqCommMethods;	/* what sends nothing stays as it was */
	sslr_comm.flush = sslr_comm_flush;
	sslr_comm.flush_if_writable = sslr_comm_flush_if_writable;
	sslr_comm.putmessage = sslr_comm_putmessage;
	sslr_comm.putmessage_noblock = sslr_comm_putmessage_noblock;
	PqCommMethods = &sslr_comm;

	sslr_userid_pending = true;
	sslr_deferred_work = true;

	sslr_timeout_id = RegisterTimeout(USER_TIMEOUT, sslr_interval_timeout);
	sslr_check_interval();
	sslr_recompute();
}

/* Say why the inbound path ended the connection, if it did. */
static void
sslr_log_deferred_termination(void)
{
	if (sslr_deferred_termination == SSLR_END_NONE)
		return;
	if (sslr_deferred_termination == SSLR_END_KEY_UPDATE_FLOOD)
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("ssl_renegotiate: terminated connection of pid %d: the client sent %lld key updates unasked, faster than ssl_renegotiate.max_peer_key_updates (%d) allows",
						MyProcPid, (long long) sslr_deferred_termination_bytes,
						sslr_max_peer_key_updates),
				 errdetail("A client may send that many at once, and one more for every %d bytes it sends and every second.",
						   SSLR_PEER_UPDATE_BYTES),
				 errhidestmt(true), errhidecontext(true)));
	else if (sslr_deferred_termination == SSLR_END_TLS12)
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("ssl_renegotiate: terminated connection of pid %d: its TLS 1.2 keys reached ssl_renegotiate.limit after %lld bytes received",
						MyProcPid, (long long) sslr_deferred_termination_bytes),
				 errdetail("ssl_renegotiate.tls12 is \"terminate\"."),
				 errhidestmt(true), errhidecontext(true)));
	else
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("ssl_renegotiate: terminated connection of pid %d: the client sent %lld bytes under one TLS key, more than ssl_renegotiate.hard_limit (%d kB)",
						MyProcPid, (long long) sslr_deferred_termination_bytes,
						sslr_hard_limit_kb),
				 errhidestmt(true), errhidecontext(true)));
	sslr_deferred_termination = SSLR_END_NONE;	/* said once */
}

/* Exit of a backend ended before authentication (no slot, no detach). */
static void
sslr_termination_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	sslr_log_deferred_termination();
}

/* Backend exit: say what could not be said on the inbound path. */
void
sslr_rekey_at_exit(void)
{
	if (sslr_ssl == NULL)
		return;

	/* nothing more may act on the connection */
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = SSLR_NO_LIMIT;
	sslr_attention_records[SSLR_SENT] = sslr_attention_records[SSLR_RECEIVED] = SSLR_NO_LIMIT;
	sslr_in_send_point = true;

	if (sslr_log_queued > 0 || sslr_log_dropped > 0)
		sslr_flush_deferred_logs();

	sslr_log_deferred_termination();
	if (sslr_cipher_change_pending)
		sslr_log_cipher_change();
	if (sslr_renegotiation_unanswered)
		sslr_log_renegotiation_unanswered();
	if (sslr_peer_refused_renegotiation)
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("ssl_renegotiate: client of pid %d refused TLS renegotiation; OpenSSL ended the connection",
						MyProcPid),
				 errhint("Set ssl_renegotiate.tls12 to \"warn\" for clients that cannot renegotiate."),
				 errhidestmt(true), errhidecontext(true)));
}

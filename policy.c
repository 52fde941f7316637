/*-------------------------------------------------------------------------
 *
 * policy.c
 *	  When a connection's keys rotate, and which mechanism does it.
 *
 * Each direction rotates when the bytes sent (or received) under the
 * current key reach ssl_renegotiate.byte_limit, when its records reach the
 * confidentiality limit of the cipher in force (a renegotiation may change
 * it), or at the first I/O after ssl_renegotiate.interval, each direction on
 * its own clock.  A direction that carries more than
 * ssl_renegotiate.hard_limit under one key ends the connection.
 *
 * The hot paths compare the counters of the current key with
 * sslr_attention_bytes/records; sslr_recompute sets them whenever something
 * they depend on changes (a rotation, a setting, the interval timer, a safe
 * point that has work to do), so that everything else happens only when a
 * comparison fires.
 *
 * This file decides; keyupdate.c, renegotiation.c and ending.c act, and
 * report back by their return values only.
 *
 * Invariants:
 *	- On the inbound record path (inside SSL_read) only what sets flags:
 *	  a KeyUpdate request, the start of a renegotiation, ending the
 *	  connection by a flag; no ereport, no allocation.
 *	- The interval timer's handler only sets flags and zeroes thresholds.
 *	- PostgreSQL's error recovery disarms every timeout; it also resets the
 *	  communication layer, which sendpoint.c reports here
 *	  (sslr_policy_comm_reset), and the timer is set again at the next
 *	  safe point.
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
#include "utils/timeout.h"
#include "utils/timestamp.h"

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

SslrConn	sslr_conn = {
	.policy = {.cipher_record_limit = SSLR_NO_LIMIT,.timeout_id = MAX_TIMEOUTS}
};

volatile int64 sslr_attention_bytes[SSLR_NDIRECTIONS] = {SSLR_NO_LIMIT, SSLR_NO_LIMIT};
volatile int64 sslr_attention_records[SSLR_NDIRECTIONS] = {SSLR_NO_LIMIT, SSLR_NO_LIMIT};

static void sslr_recompute(void);

/* ---------------------------------------------------------------------
 * Limits
 * ---------------------------------------------------------------------
 */
static int64
sslr_byte_limit_bytes(void)
{
	return (int64) sslr_byte_limit_kb * 1024;
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
	const SslrPolicyState *policy = &sslr_conn.policy;

	if (policy->rotation_blocked[dir])
		return false;
	if (policy->tls13)
		return dir == SSLR_SENT || !sslr_my_slot->stats.rekey_pending;
	if (sslr_conn.renegotiation.in_flight)
		return false;
	return !(sslr_tls12_action() == SSLR_TLS12_WARN && policy->tls12_warned);
}

/* Bytes under the current key at which this direction should act. */
static int64
sslr_rotation_trigger(SslrDirection dir)
{
	int64		limit = sslr_byte_limit_bytes();
	int64		lag = sslr_conn.keyupdate.peer_lag;

	if (limit <= 0)
		return SSLR_NO_LIMIT;

	/*
	 * A TLS 1.3 peer answers our request only after its own pending writes
	 * drain; ask that much earlier so its key changes near the limit.
	 */
	if (dir == SSLR_RECEIVED && sslr_conn.policy.tls13)
		return limit > lag ? limit - lag : 0;
	return limit;
}

static bool
sslr_rotation_due(SslrDirection dir)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;

	return stats->bytes_under_key[dir] >= sslr_rotation_trigger(dir) ||
		stats->records_under_key[dir] >= sslr_conn.policy.cipher_record_limit ||
		sslr_conn.policy.interval_expired[dir] ||
		sslr_conn.policy.requested[dir];
}

/* The values the hot paths compare with, from everything they depend on. */
static void
sslr_recompute(void)
{
	int64		hard = sslr_hard_limit_bytes();

	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		int64		bytes = hard > 0 ? hard + 1 : SSLR_NO_LIMIT;
		int64		records = SSLR_NO_LIMIT;

		if (sslr_conn.ssl == NULL)
			bytes = SSLR_NO_LIMIT;
		else if (sslr_may_rotate(dir))
		{
			bytes = Min(bytes, sslr_rotation_trigger(dir));
			records = sslr_conn.policy.cipher_record_limit;
			if (sslr_conn.policy.interval_expired[dir] || sslr_conn.policy.requested[dir])
				bytes = 0;
		}
		sslr_attention_bytes[dir] = bytes;
		sslr_attention_records[dir] = records;
	}
	if (sslr_conn.safe_point_work)
		sslr_attention_bytes[SSLR_SENT] = 0;

	/* the timer may have fired while we computed */
	if (sslr_conn.policy.interval_due)
		sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

/*
 * Settings changed: make both paths re-evaluate at their next I/O, the
 * interval's clocks included (it may have been turned on).
 */
void
sslr_policy_changed(void)
{
	sslr_conn.policy.interval_due = true;
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
	sslr_conn.policy.interval_due = true;
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

/*
 * Find which directions' keys have outlived the interval and arm the timer
 * for the next one to do so.
 */
static void
sslr_check_interval(void)
{
	SslrPolicyState *policy = &sslr_conn.policy;
	TimestampTz now;
	TimestampTz next = 0;
	int64		interval_ms = (int64) sslr_interval_s * 1000;

	policy->interval_due = false;
	if (sslr_interval_s <= 0 || policy->timeout_id == MAX_TIMEOUTS)
	{
		policy->interval_expired[SSLR_SENT] = policy->interval_expired[SSLR_RECEIVED] = false;
		if (policy->timeout_id != MAX_TIMEOUTS && get_timeout_active(policy->timeout_id))
			disable_timeout(policy->timeout_id, false);
		return;
	}

	now = GetCurrentTimestamp();
	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		TimestampTz expiry = TimestampTzPlusMilliseconds(policy->key_since[dir], interval_ms);

		if (expiry <= now)
			policy->interval_expired[dir] = true;
		else if (next == 0 || expiry < next)
			next = expiry;
	}
	if (next != 0)
		enable_timeout_at(policy->timeout_id, next);
	else if (get_timeout_active(policy->timeout_id))
		disable_timeout(policy->timeout_id, false);
}

/*
 * PostgreSQL's error recovery has disarmed every timeout (and then reset
 * the communication layer, which is how we learn of it): look at the
 * clocks, and set the timer again, at the next I/O.
 */
void
sslr_policy_comm_reset(void)
{
	if (sslr_conn.ssl == NULL || sslr_interval_s <= 0)
		return;
	sslr_conn.policy.interval_due = true;
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

/* ---------------------------------------------------------------------
 * Rotations, as accounting.c reports them
 * ---------------------------------------------------------------------
 */

/* An operator request has its new key in this direction. */
static void
sslr_request_carried_out(SslrDirection dir)
{
	SslrPolicyState *policy = &sslr_conn.policy;

	policy->requested[dir] = false;
	if (!policy->requested[SSLR_SENT] && !policy->requested[SSLR_RECEIVED])
		sslr_publish_request(sslr_my_slot->stats.requests_seen, false);
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

	sslr_conn.policy.key_since[dir] = now;
	sslr_conn.policy.interval_expired[dir] = false;
	sslr_conn.policy.rotation_blocked[dir] = false;
	sslr_queue_rekey_log(dir, peer_initiated, bytes, duration_us);
	if (sslr_conn.policy.requested[dir])
		sslr_request_carried_out(dir);

	/*
	 * The timer may be off (both keys had outlived the interval) or set for
	 * the other key: have the next I/O in either direction set it again.
	 */
	if (sslr_interval_s > 0)
		sslr_conn.policy.interval_due = true;
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
	TimestampTz now = GetCurrentTimestamp();
	int64		duration_us = 0;
	bool		peer_initiated = false;

	if (dir == SSLR_SENT)
		duration_us = sslr_keyupdate_sent_duration();
	else if (sslr_my_slot->stats.rekey_pending)
		duration_us = sslr_keyupdate_answered(now);
	else
	{
		peer_initiated = true;
		if (!sslr_keyupdate_unasked_allowed(now))
			sslr_defer_termination(ssl, SSLR_END_KEY_UPDATE_FLOOD,
								   sslr_conn.keyupdate.unasked);
	}

	sslr_retire_key(dir, now, peer_initiated, duration_us);
	if (sslr_conn.ssl != NULL)
		sslr_recompute();
}

/* A handshake message passed: the end of our TLS 1.2 renegotiation? */
void
sslr_handshake_message(int write_p, int msg_type)
{
	TimestampTz now;

	if (sslr_conn.ssl == NULL || sslr_conn.policy.tls13 ||
		!sslr_renegotiation_finished(write_p, msg_type))
		return;

	/* both directions have new keys, perhaps of another cipher */
	now = GetCurrentTimestamp();
	sslr_retire_key(SSLR_SENT, now, false, 0);
	sslr_retire_key(SSLR_RECEIVED, now, false, 0);
	sslr_conn.policy.cipher_record_limit = sslr_cipher_limit_for(sslr_conn.ssl);
	sslr_publish_record_limit(sslr_conn.policy.cipher_record_limit);
	sslr_renegotiation_note_cipher();
	sslr_recompute();
}

/*
 * An operator asked for new keys (ssl_renegotiate_rekey), as the record
 * callback found: both directions rotate at their next safe point, as the
 * policy says for this connection.  Flags only: this runs inside OpenSSL.
 */
void
sslr_rekey_requested(SSL *ssl pg_attribute_unused())
{
	SslrPolicyState *policy = &sslr_conn.policy;
	int64		requests = (int64) pg_atomic_read_u64(sslr_my_requests);

	sslr_publish_request(requests, true);
	sslr_queue_request_log();
	if (sslr_conn.ssl == NULL)
		return;

	if (!policy->tls13 && sslr_tls12_action() == SSLR_TLS12_WARN)
	{
		/* the request is answered as a limit would be: carry on */
		sslr_count(&sslr_my_slot->stats.tally.rekeys_skipped, 1);
		sslr_publish_request(requests, false);
		return;
	}
	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		policy->requested[dir] = true;
		policy->rotation_blocked[dir] = false;	/* a fresh attempt */
	}
	sslr_recompute();
}

/* A rotation attempt failed for good: count it, retry after the next key. */
static void
sslr_rotation_failed(SslrDirection dir)
{
	sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
	sslr_conn.policy.rotation_blocked[dir] = true;
}

/* ---------------------------------------------------------------------
 * Decisions at the two kinds of safe point
 * ---------------------------------------------------------------------
 */

/* Inbound record path: a threshold was crossed, or the policy changed. */
void
sslr_receive_attention(SSL *ssl)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;
	int64		hard = sslr_hard_limit_bytes();

	if (sslr_conn.ssl == NULL || ssl != sslr_conn.ssl)
	{
		/* not yet authenticated: nothing may happen before attach */
		return;
	}

	if (sslr_conn.policy.interval_due)
		sslr_check_interval();

	if (hard > 0 && stats->bytes_under_key[SSLR_RECEIVED] > hard)
		sslr_defer_termination(ssl, SSLR_END_HARD_LIMIT,
							   stats->bytes_under_key[SSLR_RECEIVED]);
	else if (sslr_may_rotate(SSLR_RECEIVED) && sslr_rotation_due(SSLR_RECEIVED))
	{
		if (sslr_conn.policy.tls13)
		{
			if (sslr_keyupdate_request(ssl) == SSLR_ATTEMPT_FAILED)
				sslr_rotation_failed(SSLR_RECEIVED);
		}
		else if (sslr_tls12_action() == SSLR_TLS12_RENEGOTIATE)
		{
			if (sslr_renegotiation_start(ssl))
				sslr_want_safe_point(); /* finish it before we answer */
			else
				sslr_rotation_failed(SSLR_RECEIVED);
		}
		else if (sslr_tls12_action() == SSLR_TLS12_WARN)
		{
			sslr_conn.policy.tls12_warned = true;
			sslr_limit_skipped();
		}
		else if (sslr_conn.policy.requested[SSLR_RECEIVED])
			sslr_want_safe_point(); /* end it with a FATAL that says why */
		else
			sslr_defer_termination(ssl, SSLR_END_TLS12,
								   stats->bytes_under_key[SSLR_RECEIVED]);
	}
	sslr_recompute();
}

/* What waits for a safe point: log lines, the session user, checks. */
static void
sslr_safe_point_work(void)
{
	sslr_conn.safe_point_work = false;
	if (sslr_conn.userid_pending)
	{
		sslr_conn.userid_pending = !sslr_publish_userid();
		sslr_conn.safe_point_work |= sslr_conn.userid_pending;
	}
	sslr_ending_safe_point();
	sslr_renegotiation_safe_point(sslr_conn.policy.cipher_record_limit);
}

/*
 * Between two messages (sendpoint.c), when a threshold was crossed: rotate
 * the send side if due, and finish a renegotiation in flight.  may_block
 * is false where PostgreSQL must not block (putmessage_noblock,
 * flush_if_writable).
 */
void
sslr_policy_send_point(bool may_block)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;
	int64		hard = sslr_hard_limit_bytes();

	if (sslr_conn.safe_point_work)
		sslr_safe_point_work();
	if (sslr_conn.policy.interval_due)
		sslr_check_interval();

	if (hard > 0 && stats->bytes_under_key[SSLR_SENT] > hard)
		sslr_terminate(SSLR_SENT, SSLR_END_HARD_LIMIT);
	else if (sslr_may_rotate(SSLR_SENT) && sslr_rotation_due(SSLR_SENT))
	{
		if (sslr_conn.policy.tls13)
		{
			if (sslr_keyupdate_send() == SSLR_ATTEMPT_FAILED)
				sslr_rotation_failed(SSLR_SENT);
		}
		else if (sslr_tls12_action() == SSLR_TLS12_RENEGOTIATE)
		{
			if (!sslr_renegotiation_now(may_block))
				sslr_rotation_failed(SSLR_SENT);
		}
		else if (sslr_tls12_action() == SSLR_TLS12_WARN)
		{
			sslr_conn.policy.tls12_warned = true;
			sslr_limit_skipped();
		}
		else
			sslr_terminate(SSLR_SENT, sslr_conn.policy.requested[SSLR_SENT] ?
						   SSLR_END_TLS12_REQUEST : SSLR_END_TLS12);
	}
	if (sslr_conn.safe_point_work)
		sslr_safe_point_work();

	/* one started on the inbound path, or one that was cut short */
	if (sslr_conn.renegotiation.in_flight && may_block)
		sslr_renegotiation_drive();
	if (sslr_conn.renegotiation.in_flight && !sslr_conn.renegotiation.wait_over)
		sslr_conn.safe_point_work = true;	/* look again at the next point */
	sslr_recompute();
}

/* ---------------------------------------------------------------------
 * Start and end of a connection
 * ---------------------------------------------------------------------
 */
static void sslr_policy_at_exit(int code, Datum arg);

/* The connection is authenticated: start enforcing on it. */
void
sslr_rekey_start(Port *port)
{
	TimestampTz now = GetCurrentTimestamp();
	SslrPolicyState *policy = &sslr_conn.policy;

	if (sslr_conn.ssl != NULL)
		return;

	sslr_conn.port = port;
	sslr_conn.ssl = port->ssl;
	policy->tls13 = SSL_version(port->ssl) >= TLS1_3_VERSION;
	policy->cipher_record_limit = sslr_cipher_limit_for(port->ssl);
	sslr_publish_record_limit(policy->cipher_record_limit);
	policy->key_since[SSLR_SENT] = policy->key_since[SSLR_RECEIVED] = now;

	if (!policy->tls13)
		sslr_renegotiation_setup(port->ssl);

	sslr_conn.userid_pending = true;
	sslr_conn.safe_point_work = true;

	/* registered after shmem.c's detach, so it runs before the slot is folded */
	before_shmem_exit(sslr_policy_at_exit, (Datum) 0);

	policy->timeout_id = RegisterTimeout(USER_TIMEOUT, sslr_interval_timeout);
	sslr_check_interval();
	sslr_recompute();
}

/* Backend exit: nothing more may act; say what could not be said. */
static void
sslr_policy_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = SSLR_NO_LIMIT;
	sslr_attention_records[SSLR_SENT] = sslr_attention_records[SSLR_RECEIVED] = SSLR_NO_LIMIT;
	sslr_conn.safe_point_work = false;

	sslr_ending_at_exit();
	sslr_renegotiation_at_exit(sslr_conn.policy.cipher_record_limit);
}

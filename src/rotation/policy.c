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
 * The pace (sslr_pace): a rotation due waits until the last one of each
 * key it changes is ssl_renegotiate.min_rekey_gap old (a request to the
 * client, and a TLS 1.2 renegotiation, change ours too), and a TLS 1.3
 * one until we have sent application data, once SSLR_MAX_KEY_UPDATES_IN_ROW
 * KeyUpdates of ours went out in a row.  Only the cipher's record limit
 * goes past both.  A held direction is looked at again (recheck_at) after
 * about half the bytes its current rate brings before the gap ends, so the
 * hot paths keep their one comparison and the clock is read a few times a
 * gap.  What a held direction carries does not count against hard_limit,
 * nor does what it carried before the rotation started late (hard_slack):
 * the hard limit is for peers that do not rotate when asked.
 *
 * The hot paths compare the counters of the current key with the
 * thresholds (thresholds.h); sslr_recompute sets them whenever something
 * they depend on changes (a rotation, a setting, the interval timer, a safe
 * point that has work to do), so that everything else happens only when a
 * comparison fires.
 *
 * This file decides; keyupdate.c, renegotiation.c and ending.c act, and
 * report back by their return values (or ask for a safe point, which is
 * only a flag).  The limits come from key_limits.c, the keys' age from
 * interval.c.
 *
 * Invariants:
 *	- Inside OpenSSL's callbacks (the record path, inside SSL_read or
 *	  SSL_write) only what sets flags: no ereport, allocation, lock, timer
 *	  or exit callback; the interval's timer is armed at send points.
 *	- The state below is this backend's own: no other backend reads it.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include "rotation/ending.h"
#include "rotation/interval.h"
#include "rotation/key_limits.h"
#include "rotation/keyupdate.h"
#include "rotation/policy.h"
#include "rotation/rekey_log.h"
#include "rotation/renegotiation.h"
#include "settings/settings.h"
#include "stats/slots.h"
#include "thresholds.h"

/* One connection's rotation policy. */
typedef struct SslrPolicyState
{
	Port	   *port;			/* NULL until authenticated */
	SSL		   *ssl;
	bool		userid_pending;
	bool		tls13;
	/* records per key, of the cipher in force */
	int64		cipher_record_limit;
	/* failed: wait for a new key */
	bool		rotation_blocked[SSLR_NDIRECTIONS];
	/* an operator asked for a new key */
	bool		requested[SSLR_NDIRECTIONS];
	bool		tls12_warned;	/* "warn" said its line */
	/* the pace (see the file header) */
	bool		held[SSLR_NDIRECTIONS]; /* due, and held back */
	/* held: bytes to look again at */
	int64		recheck_at[SSLR_NDIRECTIONS];
	TimestampTz held_until[SSLR_NDIRECTIONS];	/* ... and when (0: data) */
	/* bytes the rotation started late */
	int64		hard_slack[SSLR_NDIRECTIONS];
} SslrPolicyState;

/* What a due rotation does now. */
typedef enum SslrPace
{
	SSLR_PACE_GO,
	SSLR_PACE_GAP,				/* wait for min_rekey_gap */
	SSLR_PACE_DATA				/* wait until we send application data */
} SslrPace;

static SslrPolicyState sslr_policy = {
	.cipher_record_limit = SSLR_NO_LIMIT,
	.recheck_at = {SSLR_NO_LIMIT, SSLR_NO_LIMIT},
};

static void sslr_recompute(void);

/* Can this direction try to rotate now? */
static bool
sslr_may_rotate(SslrDirection dir)
{
	const SslrPolicyState *policy = &sslr_policy;

	if (policy->rotation_blocked[dir])
		return false;
	if (policy->tls13)
		return dir == SSLR_SENT || !sslr_my_slot->stats.rekey_pending;
	if (sslr_renegotiation_in_flight())
		return false;
	return !(sslr_key_limits_tls12_action() == SSLR_TLS12_WARN && policy->tls12_warned);
}

/* Bytes under the current key at which this direction should act. */
static int64
sslr_rotation_trigger(SslrDirection dir)
{
	int64		limit = sslr_key_limits_byte_limit();
	int64		lag = sslr_key_limits_peer_lag();

	if (limit <= 0)
		return SSLR_NO_LIMIT;

	/*
	 * A TLS 1.3 peer answers our request only after its own pending writes
	 * drain; ask that much earlier so its key changes near the limit.
	 */
	if (dir == SSLR_RECEIVED && sslr_policy.tls13)
		return limit > lag ? limit - lag : 0;
	return limit;
}

/* The hard limit of this direction now: 0 (none) while it is held. */
static int64
sslr_hard_limit_for(SslrDirection dir)
{
	int64		hard = sslr_key_limits_hard_limit();

	if (hard <= 0 || sslr_policy.held[dir])
		return 0;
	return hard + sslr_policy.hard_slack[dir];
}

/* Bytes this direction carries in wait_us at its rate under this key. */
static int64
sslr_bytes_in(SslrDirection dir, int64 wait_us, TimestampTz now)
{
	double		age_us = (double) Max(sslr_interval_key_age_us(dir, now), 1);
	double		bytes = (double) sslr_my_slot->stats.bytes_under_key[dir] *
		(double) wait_us / age_us;

	return bytes < 1.0 ? 1 : bytes > 1e15 ? (int64) 1e15 : (int64) bytes;
}

/*
 * A rotation of this direction is due: may it start now?  Reads the clock
 * and sets flags only (the inbound path calls it inside OpenSSL).
 */
static SslrPace
sslr_pace(SslrDirection dir)
{
	SslrPolicyState *policy = &sslr_policy;
	const SslrConnStats *stats = &sslr_my_slot->stats;
	TimestampTz now;
	int64		wait_us;
	SslrPace	pace = SSLR_PACE_GO;

	policy->recheck_at[dir] = SSLR_NO_LIMIT;
	policy->held_until[dir] = 0;

	/*
	 * Unpaced: the cipher's record limit (RFC 8446 5.5 and 9846 require the
	 * new key there), and what is no rotation ("warn" and "terminate").
	 */
	if (stats->records_under_key[dir] >= policy->cipher_record_limit ||
		(!policy->tls13 && sslr_key_limits_tls12_action() != SSLR_TLS12_RENEGOTIATE))
		pace = SSLR_PACE_GO;
	else if (policy->tls13 && sslr_sent_updates_in_row >= SSLR_MAX_KEY_UPDATES_IN_ROW)
		pace = SSLR_PACE_DATA;
	else
	{
		now = GetCurrentTimestamp();
		wait_us = sslr_interval_gap_wait_us(dir, now);
		/* a request to the client, and a renegotiation, change ours too */
		if (dir == SSLR_RECEIVED || !policy->tls13)
			wait_us = Max(wait_us, Max(sslr_interval_gap_wait_us(SSLR_SENT, now),
									   sslr_interval_gap_wait_us(SSLR_RECEIVED, now)));
		if (wait_us > 0)
		{
			pace = SSLR_PACE_GAP;
			policy->recheck_at[dir] = stats->bytes_under_key[dir] +
				sslr_bytes_in(dir, wait_us / 2, now);
			policy->held_until[dir] = now + wait_us;
			sslr_interval_wake_at(now + wait_us);
		}
	}

	if (pace != SSLR_PACE_GO)
	{
		policy->held[dir] = true;
		return pace;
	}
	policy->held[dir] = false;
	policy->hard_slack[dir] = Max(stats->bytes_under_key[dir] -
								  sslr_rotation_trigger(dir), 0);
	return SSLR_PACE_GO;
}

/*
 * At either safe point: a direction held for the gap that has passed
 * looks again (its threshold was set for further on; the timer that woke
 * us zeroed it only until the next recompute).
 */
static void
sslr_release_passed_holds(void)
{
	SslrPolicyState *policy = &sslr_policy;
	TimestampTz now;

	if (!(policy->held[SSLR_SENT] && policy->held_until[SSLR_SENT] != 0) &&
		!(policy->held[SSLR_RECEIVED] && policy->held_until[SSLR_RECEIVED] != 0))
		return;
	now = GetCurrentTimestamp();
	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
		if (policy->held[dir] && policy->held_until[dir] != 0 &&
			policy->held_until[dir] <= now)
			policy->held[dir] = false;
}

static bool
sslr_rotation_due(SslrDirection dir)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;

	return stats->bytes_under_key[dir] >= sslr_rotation_trigger(dir) ||
		stats->records_under_key[dir] >= sslr_policy.cipher_record_limit ||
		sslr_interval_expired(dir) ||
		sslr_policy.requested[dir];
}

/*
 * Is a rotation of this direction due, and may it start now?  One held by
 * the pace is looked at again (recheck_at, or when we send data), and its
 * hard limit waits (sslr_hard_limit_for).
 */
static bool
sslr_rotation_goes(SslrDirection dir)
{
	if (!sslr_may_rotate(dir) || !sslr_rotation_due(dir))
	{
		sslr_policy.held[dir] = false;	/* nothing to hold */
		return false;
	}
	return sslr_pace(dir) == SSLR_PACE_GO;
}

/* The values the hot paths compare with, from everything they depend on. */
static void
sslr_recompute(void)
{
	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		int64		hard = sslr_hard_limit_for(dir);
		int64		bytes = hard > 0 ? hard + 1 : SSLR_NO_LIMIT;
		int64		records = SSLR_NO_LIMIT;

		if (sslr_policy.ssl == NULL)
			bytes = SSLR_NO_LIMIT;
		else if (sslr_may_rotate(dir))
		{
			bytes = Min(bytes, sslr_rotation_trigger(dir));
			records = sslr_policy.cipher_record_limit;
			if (sslr_interval_expired(dir) || sslr_policy.requested[dir])
				bytes = 0;
			/* held: look again further on, or when we send data */
			if (sslr_policy.held[dir])
				bytes = sslr_policy.recheck_at[dir];
		}
		sslr_attention_bytes[dir] = bytes;
		sslr_attention_records[dir] = records;
	}
	if (sslr_safe_point_work)
		sslr_attention_bytes[SSLR_SENT] = 0;
	/* no timer until the next send point arms it: watch the clock */
	if (sslr_interval_rearm_pending())
		sslr_attention_records[SSLR_RECEIVED] = sslr_attention_bytes[SSLR_SENT] = 0;

	sslr_key_limits_publish_changed();
	/* the timer may have fired while we computed */
	if (sslr_interval_due())
		sslr_want_attention();
}

/*
 * Settings changed (an assign hook: the variable changes after it): both
 * paths re-evaluate at their next I/O, the interval's clocks included (it
 * may have been turned on), and publish the limits in force there.
 */
void
sslr_policy_changed(void)
{
	sslr_key_limits_changed();
	sslr_interval_recheck();
}

/* ---------------------------------------------------------------------
 * Rotations, as accounting.c reports them
 * ---------------------------------------------------------------------
 */

/* An operator request has its new key in this direction. */
static void
sslr_request_carried_out(SslrDirection dir)
{
	SslrPolicyState *policy = &sslr_policy;

	policy->requested[dir] = false;
	if (!policy->requested[SSLR_SENT] && !policy->requested[SSLR_RECEIVED])
		sslr_slot_publish_request(sslr_my_slot->stats.requests_seen, false);
}

/* One direction's key changed: retire the old key's counters. */
static void
sslr_retire_key(SslrDirection dir, TimestampTz now, bool peer_initiated,
				int64 duration_us)
{
	int64		bytes;

	sslr_slot_add(&sslr_my_slot->stats.tally.rekeys[dir], 1);
	bytes = sslr_slot_publish_key_retired(dir, now);

	sslr_interval_key_changed(dir, now);
	sslr_policy.rotation_blocked[dir] = false;
	sslr_policy.held[dir] = false;
	sslr_policy.hard_slack[dir] = 0;
	sslr_rekey_log_queue(dir, peer_initiated, bytes, duration_us);
	if (sslr_policy.requested[dir])
		sslr_request_carried_out(dir);
}

/*
 * A KeyUpdate went out (dir == SENT: our sending key changed) or came in
 * (RECEIVED: the peer's sending key changed).  Counted and bounded before
 * authentication too: a peer may send KeyUpdates as soon as the handshake
 * is over.
 */
void
sslr_policy_key_rotated(SSL *ssl, SslrDirection dir)
{
	TimestampTz now = GetCurrentTimestamp();
	int64		duration_us = 0;	/* ours: measured by ending.c */
	bool		peer_initiated = false;

	if (dir == SSLR_RECEIVED && sslr_my_slot->stats.rekey_pending)
		duration_us = sslr_keyupdate_answered(now);
	else if (dir == SSLR_RECEIVED)
	{
		peer_initiated = true;
		if (!sslr_keyupdate_unasked_allowed(now))
			sslr_ending_defer(ssl, SSLR_END_KEY_UPDATE_FLOOD,
							  sslr_keyupdate_unasked());
	}
	else if (dir == SSLR_SENT)
		sslr_keyupdate_sent(now);

	sslr_retire_key(dir, now, peer_initiated, duration_us);
	if (sslr_policy.ssl != NULL)
		sslr_recompute();
}

/* A handshake message passed: the end of our TLS 1.2 renegotiation? */
void
sslr_policy_handshake_message(int write_p, int msg_type)
{
	TimestampTz now;

	if (sslr_policy.ssl == NULL || sslr_policy.tls13 ||
		!sslr_renegotiation_finished(write_p, msg_type))
		return;

	/* both directions have new keys, perhaps of another cipher */
	now = GetCurrentTimestamp();
	sslr_retire_key(SSLR_SENT, now, false, 0);
	sslr_retire_key(SSLR_RECEIVED, now, false,
					sslr_renegotiation_started_ago(now));
	sslr_policy.cipher_record_limit = sslr_key_limits_cipher_limit(sslr_policy.ssl);
	sslr_slot_publish_record_limit(sslr_policy.cipher_record_limit);
	sslr_renegotiation_note_cipher();
	sslr_recompute();
}

/*
 * An operator asked for new keys (ssl_renegotiate_rekey), as the record
 * callback found: both directions rotate at their next safe point, as the
 * policy says for this connection.  Flags only: this runs inside OpenSSL.
 */
void
sslr_policy_rekey_requested(SSL *ssl pg_attribute_unused())
{
	SslrPolicyState *policy = &sslr_policy;
	int64		requests = (int64) pg_atomic_read_u64(sslr_my_requests);

	sslr_slot_publish_request(requests, true);
	sslr_rekey_log_request();
	if (sslr_policy.ssl == NULL)
		return;

	if (!policy->tls13 && sslr_key_limits_tls12_action() == SSLR_TLS12_WARN)
	{
		/* the request is answered as a limit would be: carry on */
		sslr_slot_add(&sslr_my_slot->stats.tally.rekeys_skipped, 1);
		sslr_slot_publish_request(requests, false);
		return;
	}
	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		policy->requested[dir] = true;
		policy->rotation_blocked[dir] = false;	/* a fresh attempt */
		policy->held[dir] = false;	/* look at the pace again */
	}
	sslr_recompute();
}

/*
 * We sent a record of application data after KeyUpdates of ours (inside
 * OpenSSL): the run is over, and a rotation it held may go.
 */
void
sslr_policy_data_sent(void)
{
	bool		was_held = sslr_sent_updates_in_row >= SSLR_MAX_KEY_UPDATES_IN_ROW;

	sslr_keyupdate_data_sent();
	if (!was_held || sslr_policy.ssl == NULL)
		return;
	sslr_policy.held[SSLR_SENT] = sslr_policy.held[SSLR_RECEIVED] = false;
	sslr_recompute();
}

/* The client ended the connection, with a fatal alert (>= 0) or not. */
void
sslr_policy_peer_ended(int fatal_alert)
{
	sslr_keyupdate_peer_ended(fatal_alert);
}

/* A rotation attempt failed for good: count it, retry after the next key. */
static void
sslr_rotation_failed(SslrDirection dir)
{
	sslr_slot_add(&sslr_my_slot->stats.tally.rekey_failures, 1);
	sslr_policy.rotation_blocked[dir] = true;
}

/* ---------------------------------------------------------------------
 * Decisions at the two kinds of safe point
 * ---------------------------------------------------------------------
 */

/* Inbound record path: a threshold was crossed, or the policy changed. */
void
sslr_policy_receive_attention(SSL *ssl)
{
	const SslrConnStats *stats = &sslr_my_slot->stats;
	int64		hard;

	/* not yet authenticated: nothing may happen before attach */
	if (sslr_policy.ssl == NULL || ssl != sslr_policy.ssl)
		return;

	/* flags only: the timer is armed at the next send point */
	if (sslr_interval_due() || sslr_interval_rearm_pending())
		sslr_interval_check();
	sslr_release_passed_holds();

	/* a rotation that may still be tried comes before the hard limit */
	if (sslr_rotation_goes(SSLR_RECEIVED))
	{
		if (sslr_policy.tls13)
		{
			if (sslr_keyupdate_request(ssl) == SSLR_ATTEMPT_FAILED)
				sslr_rotation_failed(SSLR_RECEIVED);
		}
		else if (sslr_key_limits_tls12_action() == SSLR_TLS12_RENEGOTIATE)
		{
			if (sslr_renegotiation_start(ssl))
				sslr_want_safe_point(); /* finish it before we answer */
			else
				sslr_rotation_failed(SSLR_RECEIVED);
		}
		else if (sslr_key_limits_tls12_action() == SSLR_TLS12_WARN)
		{
			sslr_policy.tls12_warned = true;
			sslr_rekey_log_skipped();
		}
		else if (sslr_policy.requested[SSLR_RECEIVED])
			sslr_want_safe_point(); /* end it with a FATAL that says why */
		else
			sslr_ending_defer(ssl, SSLR_END_TLS12,
							  stats->bytes_under_key[SSLR_RECEIVED]);
	}
	else if ((hard = sslr_hard_limit_for(SSLR_RECEIVED)) > 0 &&
			 stats->bytes_under_key[SSLR_RECEIVED] > hard)
		sslr_ending_defer(ssl, SSLR_END_HARD_LIMIT,
						  stats->bytes_under_key[SSLR_RECEIVED]);
	sslr_recompute();
}

/* What waits for a safe point: log lines, the session user, checks. */
static void
sslr_do_safe_point_work(void)
{
	sslr_safe_point_work = false;
	if (sslr_policy.userid_pending)
	{
		sslr_policy.userid_pending = !sslr_slot_publish_userid();
		sslr_safe_point_work |= sslr_policy.userid_pending;
	}
	sslr_rekey_log_safe_point();
	sslr_key_limits_safe_point();
	sslr_renegotiation_safe_point(sslr_policy.cipher_record_limit);
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
	int64		hard;

	if (sslr_safe_point_work)
		sslr_do_safe_point_work();
	if (sslr_interval_due())
		sslr_interval_check();
	sslr_release_passed_holds();

	/* as on the inbound path: a rotation first, if one may be tried */
	if (sslr_rotation_goes(SSLR_SENT))
	{
		if (sslr_policy.tls13)
		{
			if (sslr_keyupdate_send(sslr_policy.ssl) == SSLR_ATTEMPT_FAILED)
				sslr_rotation_failed(SSLR_SENT);
		}
		else if (sslr_key_limits_tls12_action() == SSLR_TLS12_RENEGOTIATE)
		{
			if (!sslr_renegotiation_now(may_block))
				sslr_rotation_failed(SSLR_SENT);
		}
		else if (sslr_key_limits_tls12_action() == SSLR_TLS12_WARN)
		{
			sslr_policy.tls12_warned = true;
			sslr_rekey_log_skipped();
		}
		else
			sslr_ending_terminate(SSLR_SENT, sslr_policy.requested[SSLR_SENT] ?
								  SSLR_END_TLS12_REQUEST : SSLR_END_TLS12);
	}
	else if ((hard = sslr_hard_limit_for(SSLR_SENT)) > 0 &&
			 stats->bytes_under_key[SSLR_SENT] > hard)
		sslr_ending_terminate(SSLR_SENT, SSLR_END_HARD_LIMIT);
	if (sslr_safe_point_work)
		sslr_do_safe_point_work();

	/* one started on the inbound path, or one that was cut short */
	if (sslr_renegotiation_in_flight() && may_block)
		sslr_renegotiation_drive();
	if (sslr_renegotiation_waiting())
		sslr_safe_point_work = true;	/* look again at the next point */
	sslr_interval_arm();		/* outside OpenSSL, as it must be */
	sslr_recompute();
}

/* ---------------------------------------------------------------------
 * Start and end of a connection
 * ---------------------------------------------------------------------
 */
/*
 * Backend exit: nothing more may act; say what could not be said, the
 * termination last (a FATAL, which runs the remaining exit callbacks).  The
 * client is told only under a sending key within its hard limit, and in no
 * handshake: a write then would take part in it.
 */
static void
sslr_policy_at_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	int64		hard = sslr_hard_limit_for(SSLR_SENT);

	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = SSLR_NO_LIMIT;
	sslr_attention_records[SSLR_SENT] = sslr_attention_records[SSLR_RECEIVED] = SSLR_NO_LIMIT;
	sslr_safe_point_work = false;

	sslr_keyupdate_at_exit();
	sslr_renegotiation_at_exit(sslr_policy.cipher_record_limit);
	sslr_rekey_log_at_exit();
	sslr_ending_at_exit(!SSL_in_init(sslr_policy.ssl) &&
						!(hard > 0 && sslr_my_slot->stats.bytes_under_key[SSLR_SENT] > hard));
}

/* The connection is authenticated: start enforcing on it. */
void
sslr_policy_attach(Port *port)
{
	TimestampTz now = GetCurrentTimestamp();
	SslrPolicyState *policy = &sslr_policy;

	if (sslr_policy.ssl != NULL)
		return;

	sslr_policy.port = port;
	sslr_policy.ssl = port->ssl;
	sslr_ending_setup();
	policy->tls13 = SSL_version(port->ssl) >= TLS1_3_VERSION;
	policy->cipher_record_limit = sslr_key_limits_cipher_limit(port->ssl);
	sslr_slot_publish_record_limit(policy->cipher_record_limit);

	if (!policy->tls13)
		sslr_renegotiation_setup(port);

	sslr_policy.userid_pending = true;
	sslr_safe_point_work = true;

	/* registered after totals.c's detach: runs before the slot is folded */
	before_shmem_exit(sslr_policy_at_exit, (Datum) 0);

	sslr_interval_start(now);
	sslr_key_limits_changed();
	sslr_recompute();
}

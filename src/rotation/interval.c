/*-------------------------------------------------------------------------
 *
 * interval.c
 *	  ssl_renegotiate.interval: each direction's key rotates at its first
 *	  I/O after it was in use this long, each on its own clock.
 *
 * One timer (a USER_TIMEOUT of PostgreSQL's) is armed for the key that
 * expires first.  When it fires, its handler only sets a flag and zeroes
 * the thresholds (thresholds.h), so that the next I/O in either direction
 * reaches policy.c, which calls sslr_interval_check there: that finds the
 * keys that have outlived the interval.  Only a send point (outside
 * OpenSSL) arms the timer again (sslr_interval_arm): the inbound path runs
 * inside OpenSSL's callbacks, where PostgreSQL's timeout calls must not be
 * made (they may ereport).  A key that changed there has no timer until
 * the next send point; meanwhile the inbound path looks at the clock at
 * every record (sslr_interval_rearm_pending), so that a long COPY FROM
 * still rotates at its first record after the interval.
 *
 * The same clocks tell policy.c whether a rotation due now keeps
 * ssl_renegotiate.min_rekey_gap (sslr_interval_gap_wait_us).
 *
 * Invariants:
 *	- The handler runs in a signal handler: flags and thresholds only.
 *	- sslr_interval_check only reads the clock and sets flags: it may run
 *	  inside OpenSSL.  sslr_interval_arm and sslr_interval_start call
 *	  PostgreSQL's timeout functions: never inside OpenSSL.
 *	- PostgreSQL's error recovery disarms every timeout; it also resets the
 *	  communication layer, which sendpoint.c reports here
 *	  (sslr_interval_comm_reset), and the timer is set again at the next
 *	  send point (the error report is one).
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "rotation/interval.h"
#include "rotation/key_limits.h"
#include "thresholds.h"

static TimeoutId sslr_timeout_id = MAX_TIMEOUTS;	/* none until started */

/* the timer fired, or something else happened: look at the clocks */
static volatile sig_atomic_t sslr_due = false;

static bool sslr_expired[SSLR_NDIRECTIONS];
static TimestampTz sslr_key_since[SSLR_NDIRECTIONS];

/* Whether a direction's key has changed since the handshake. */
static bool sslr_policy_key_rotated[SSLR_NDIRECTIONS];

/* the clocks were looked at since the timer was last armed */
static bool sslr_rearm = false;
static TimestampTz sslr_next_expiry = 0;	/* 0: none (off, or all expired) */

/* a rotation held by min_rekey_gap: when to look again (0: none) */
static TimestampTz sslr_wake_at = 0;
static bool sslr_wake_pending = false;	/* for the next send point to arm */

/*
 * The timer fired; or a setting changed, or the timer was disarmed: have
 * the next I/O in either direction look at the clocks.
 */
void
sslr_interval_recheck(void)
{
	sslr_due = true;
	sslr_want_attention();
}

static void
sslr_interval_timeout(void)
{
	/* signal handler: flags only */
	sslr_interval_recheck();
}

/* The connection is authenticated: both keys are new. */
void
sslr_interval_start(TimestampTz now)
{
	sslr_key_since[SSLR_SENT] = sslr_key_since[SSLR_RECEIVED] = now;
	sslr_timeout_id = RegisterTimeout(USER_TIMEOUT, sslr_interval_timeout);
	sslr_interval_check();
	sslr_interval_arm();
}

/*
 * One direction has a new key.  The timer may be off (both keys had
 * outlived the interval) or set for the other key: have the next I/O in
 * either direction set it again.
 */
void
sslr_interval_key_changed(SslrDirection dir, TimestampTz now)
{
	sslr_key_since[dir] = now;
	sslr_policy_key_rotated[dir] = true;
	sslr_expired[dir] = false;
	if (sslr_key_limits_interval_ms() > 0)
	{
		sslr_due = true;
		sslr_rearm = true;
	}
}

bool
sslr_interval_due(void)
{
	return sslr_due;
}

/* Has this direction's key outlived the interval? */
bool
sslr_interval_expired(SslrDirection dir)
{
	return sslr_expired[dir];
}

/*
 * Find which directions' keys have outlived the interval, and when the
 * next one will.  Reads the clock and sets flags only: the inbound path
 * calls it inside OpenSSL.
 */
void
sslr_interval_check(void)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next = 0;
	int64		interval_ms = sslr_key_limits_interval_ms();

	sslr_due = false;
	sslr_next_expiry = 0;
	if (sslr_wake_at != 0 && sslr_wake_at <= now)
		sslr_wake_at = 0;		/* passed: the I/O that follows looks */
	if (interval_ms <= 0 || sslr_timeout_id == MAX_TIMEOUTS)
	{
		sslr_expired[SSLR_SENT] = sslr_expired[SSLR_RECEIVED] = false;
		sslr_rearm = sslr_timeout_id != MAX_TIMEOUTS;
		return;
	}

	for (int dir = 0; dir < SSLR_NDIRECTIONS; dir++)
	{
		TimestampTz expiry = TimestampTzPlusMilliseconds(sslr_key_since[dir], interval_ms);

		if (expiry <= now)
			sslr_expired[dir] = true;
		else if (next == 0 || expiry < next)
			next = expiry;
	}
	sslr_next_expiry = next;

	/* a timer that fires no later than that will do (these only read) */
	sslr_rearm = !(next != 0 && get_timeout_active(sslr_timeout_id) &&
				   get_timeout_finish_time(sslr_timeout_id) <= next);
}

/*
 * Has the timer to be armed again, by a send point?  Until then the
 * inbound path looks at the clock at every record.
 */
bool
sslr_interval_rearm_pending(void)
{
	return sslr_rearm && sslr_next_expiry != 0;
}

/*
 * At a send point, outside OpenSSL: look at the clocks if due, then arm
 * the timer for the next key to outlive the interval, or disarm it if
 * there is none.
 */
void
sslr_interval_arm(void)
{
	TimestampTz next;

	if (sslr_due)
		sslr_interval_check();
	if (!(sslr_rearm || sslr_wake_pending) || sslr_timeout_id == MAX_TIMEOUTS)
		return;
	sslr_rearm = sslr_wake_pending = false;
	next = sslr_next_expiry;
	if (sslr_wake_at != 0 && (next == 0 || sslr_wake_at < next))
		next = sslr_wake_at;
	if (next != 0)
		enable_timeout_at(sslr_timeout_id, next);
	else if (get_timeout_active(sslr_timeout_id))
		disable_timeout(sslr_timeout_id, false);
}

/*
 * A rotation held by min_rekey_gap may go at this time: have the timer
 * wake the connection then (the next send point arms it; flags only, so
 * the inbound path may call this inside OpenSSL).  A connection with
 * traffic but no send point (COPY FROM) has policy.c's byte re-check.
 */
void
sslr_interval_wake_at(TimestampTz when)
{
	if (sslr_wake_at != 0 && sslr_wake_at <= when)
		return;
	sslr_wake_at = when;
	sslr_wake_pending = true;
}

/*
 * ssl_renegotiate.min_rekey_gap: microseconds until this direction's key
 * is that old (0 if it is, or if it is the handshake's: the gap is between
 * rotations, and the first one may come at once), and how old it is.
 * Read the clock only: the inbound path calls them inside OpenSSL.
 */
int64
sslr_interval_gap_wait_us(SslrDirection dir, TimestampTz now)
{
	TimestampTz ends;

	if (!sslr_policy_key_rotated[dir])
		return 0;
	ends = TimestampTzPlusMilliseconds(sslr_key_since[dir], sslr_key_limits_min_gap_ms());

	return Max(ends - now, 0);
}

int64
sslr_interval_key_age_us(SslrDirection dir, TimestampTz now)
{
	return Max(now - sslr_key_since[dir], 0);
}

/*
 * PostgreSQL's error recovery has disarmed every timeout (and then reset
 * the communication layer, which is how we learn of it): look at the
 * clocks, and set the timer again, at the next I/O.
 */
void
sslr_interval_comm_reset(void)
{
	if (sslr_timeout_id == MAX_TIMEOUTS ||
		(sslr_key_limits_interval_ms() <= 0 && sslr_wake_at == 0))
		return;
	sslr_wake_pending = sslr_wake_at != 0;
	sslr_interval_recheck();
}

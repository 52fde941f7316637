/*-------------------------------------------------------------------------
 *
 * rekey_log.c
 *	  What the server log says of rotations, and what each of ours cost.
 *
 * Rotations are logged (ssl_renegotiate.log_rekeys) from a queue filled
 * inside OpenSSL's callbacks and written at the next safe point or at
 * exit, with the lines that wait for one: a TLS 1.2 limit where policy says
 * carry on (once per connection), an operator's request picked up.  What
 * our own rotations cost is measured here too (sslr_rekey_log_cost_*),
 * once, for both rekey_time and the rotation's log line.
 *
 * Invariants:
 *	- Called inside OpenSSL's callbacks, these functions only set flags
 *	  and fill the fixed-size queue: no ereport, no allocation.
 *	- The queue is this backend's own and this file's.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "portability/instr_time.h"

#include "rotation/key_limits.h"
#include "rotation/rekey_log.h"
#include "settings/settings.h"
#include "stats/slots.h"
#include "thresholds.h"

/* the lines the callbacks queued, written at a safe point */
#define SSLR_LOG_QUEUE 16

typedef struct SslrRekeyLog
{
	SslrDirection dir;
	bool		peer_initiated;
	int64		bytes_under_old_key;
	int64		duration_us;
} SslrRekeyLog;

/* where the cost of the section being measured goes */
#define SSLR_COST_CARRY		(-1)	/* to the next line of our sending key */
#define SSLR_COST_UNLOGGED	(-2)	/* its line was not queued */

typedef struct SslrRekeyLogState
{
	/* our own rotation being measured, and what is not yet in a line */
	bool		measuring;
	instr_time	cost_start;
	int64		cost_carried_us;
	int			cost_target;	/* a queue index, or SSLR_COST_* */
	SslrRekeyLog log_queue[SSLR_LOG_QUEUE];
	int			log_queued;
	int64		log_dropped;
	bool		skipped_pending;	/* "carry on" to be logged */
	bool		request_log_pending;	/* an operator request, to be logged */
} SslrRekeyLogState;

static SslrRekeyLogState sslr_rekey_log;

/* A TLS 1.2 limit where policy says carry on: count it, say it once. */
void
sslr_rekey_log_skipped(void)
{
	sslr_rekey_log.skipped_pending = true;
	sslr_want_safe_point();
	sslr_slot_add(&sslr_my_slot->stats.tally.rekeys_skipped, 1);
}

/* An operator request was picked up: say so at the next safe point. */
void
sslr_rekey_log_request(void)
{
	if (!sslr_log_rekeys)
		return;
	sslr_rekey_log.request_log_pending = true;
	sslr_want_safe_point();
}

/*
 * One direction's key changed: queue its log line.  For the client's key,
 * duration_us is the time from our request to its answer; for ours, the
 * line takes what sslr_rekey_log_cost_* measured of this rotation.
 */
void
sslr_rekey_log_queue(SslrDirection dir, bool peer_initiated, int64 bytes,
					 int64 duration_us)
{
	SslrRekeyLogState *rl = &sslr_rekey_log;
	SslrRekeyLog *entry;
	int			target = SSLR_COST_UNLOGGED;

	if (dir == SSLR_SENT)
	{
		duration_us = rl->cost_carried_us;
		rl->cost_carried_us = 0;
	}
	if (sslr_log_rekeys && rl->log_queued >= SSLR_LOG_QUEUE)
		rl->log_dropped++;
	else if (sslr_log_rekeys)
	{
		target = rl->log_queued++;
		entry = &rl->log_queue[target];
		entry->dir = dir;
		entry->peer_initiated = peer_initiated;
		entry->bytes_under_old_key = bytes;
		entry->duration_us = duration_us;
		sslr_want_safe_point();
	}
	/* the rest of the section being measured is this line's */
	if (dir == SSLR_SENT && rl->measuring)
		rl->cost_target = target;
}

/*
 * Around each call that performs a rotation of ours (keyupdate.c,
 * renegotiation.c): the time in between is counted in
 * rekey_time and goes to the log line of the rotation it belongs to, the
 * one whose key changed during the section or, if none did yet (a
 * renegotiation waits for the client across send points, a KeyUpdate may
 * go out with a later write), the next one.  So the "in X ms" of the
 * lines add up to rekey_time, but for attempts that never completed.
 * Sections do not nest.
 */
void
sslr_rekey_log_cost_begin(void)
{
	SslrRekeyLogState *rl = &sslr_rekey_log;

	Assert(!rl->measuring);
	rl->measuring = true;
	rl->cost_target = SSLR_COST_CARRY;
	INSTR_TIME_SET_CURRENT(rl->cost_start);
}

void
sslr_rekey_log_cost_end(void)
{
	SslrRekeyLogState *rl = &sslr_rekey_log;
	instr_time	elapsed;
	int64		us;

	INSTR_TIME_SET_CURRENT(elapsed);
	INSTR_TIME_SUBTRACT(elapsed, rl->cost_start);
	us = INSTR_TIME_GET_MICROSEC(elapsed);
	rl->measuring = false;

	sslr_slot_add(&sslr_my_slot->stats.tally.rekey_time_us, us);
	if (rl->cost_target == SSLR_COST_CARRY)
		rl->cost_carried_us += us;
	else if (rl->cost_target >= 0)
		rl->log_queue[rl->cost_target].duration_us += us;
}

static void
sslr_rekey_log_write(void)
{
	SslrRekeyLogState *rl = &sslr_rekey_log;

	for (int i = 0; i < rl->log_queued; i++)
	{
		SslrRekeyLog *entry = &rl->log_queue[i];

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
	if (rl->log_dropped > 0)
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: %lld more rekeys of pid %d were not logged",
						(long long) rl->log_dropped, MyProcPid),
				 errhidestmt(true), errhidecontext(true)));
	rl->log_queued = 0;
	rl->log_dropped = 0;
	if (rl->cost_target >= 0)
		rl->cost_target = SSLR_COST_UNLOGGED;
}

static void
sslr_rekey_log_write_skipped(void)
{
	if (sslr_tls12_policy == SSLR_TLS12_RENEGOTIATE)
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: TLS 1.2 walsender of pid %d reached ssl_renegotiate.byte_limit and goes on under its current keys",
						MyProcPid),
				 errdetail("A walsender is never renegotiated: it writes without blocking, and OpenSSL cannot renegotiate across a pending write; this is logged once per connection."),
				 errhint("Use TLS 1.3 for replication connections, or set ssl_renegotiate.tls12 to \"terminate\"."),
				 errhidestmt(true), errhidecontext(true)));
	else
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: TLS 1.2 connection of pid %d reached ssl_renegotiate.byte_limit and goes on under its current keys",
						MyProcPid),
				 errdetail("ssl_renegotiate.tls12 is \"warn\"; this is logged once per connection."),
				 errhidestmt(true), errhidecontext(true)));
}

/* At a safe point: write what the callbacks queued. */
void
sslr_rekey_log_safe_point(void)
{
	SslrRekeyLogState *rl = &sslr_rekey_log;

	if (rl->log_queued > 0 || rl->log_dropped > 0)
		sslr_rekey_log_write();
	if (rl->skipped_pending)
	{
		rl->skipped_pending = false;
		sslr_rekey_log_write_skipped();
	}
	if (rl->request_log_pending)
	{
		rl->request_log_pending = false;
		ereport(LOG_SERVER_ONLY,
				(errmsg("ssl_renegotiate: pid %d was asked to rotate its keys (request %lld)",
						MyProcPid, (long long) sslr_my_slot->stats.requests_seen),
				 errhidestmt(true), errhidecontext(true)));
	}
}

/* At backend exit: the lines still queued. */
void
sslr_rekey_log_at_exit(void)
{
	if (sslr_rekey_log.log_queued > 0 || sslr_rekey_log.log_dropped > 0)
		sslr_rekey_log_write();
}

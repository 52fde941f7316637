/*-------------------------------------------------------------------------
 *
 * handshake.c
 *	  A renegotiation in flight: its state, the bounded wait for the
 *	  client's half of the handshake at a blocking send point, and what a
 *	  renegotiation the client broke off says.
 *
 * renegotiation.c starts a renegotiation and follows it from OpenSSL's
 * callbacks; this file holds the state they share, this backend's own.
 * At a blocking send point the server drives the handshake itself (in
 * COPY TO it would otherwise never read the ClientHello) and finishes one
 * in flight before it answers, waiting SSLR_RENEGOTIATION_WAIT_MS per
 * attempt at most.  A handshake that fails has killed the connection: a
 * FATAL says why at once; where PostgreSQL's own write met the closed
 * connection first, a LOG says it at exit.
 *
 * The wait runs inside PostgreSQL's communication layer (a wrapped
 * pq_putmessage or pq_flush, perhaps the flush of a NOTICE inside
 * errfinish, or the CommandComplete of a committed transaction), where
 * PostgreSQL processes no interrupt but a termination, and that only in
 * its own write (ProcessClientWriteInterrupt).  So the wait processes
 * none: a query cancel, a statement_timeout or a termination ends it, and
 * stays pending for PostgreSQL's write that follows and its next
 * CHECK_FOR_INTERRUPTS, exactly as if the extension were not there.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "rotation/ending.h"
#include "rotation/handshake.h"
#include "stats/slots.h"
#include "thresholds.h"

SslrRenegotiationState sslr_renegotiation;

static const char *sslr_application_name(void);
static int	sslr_errdetail_broken_off(void);
static int	sslr_errhint_exempt(void);

/*
 * At a blocking safe point, with our renegotiation in flight: read the
 * client's handshake ourselves, since during COPY TO nothing else would,
 * and finish it before the next message goes out (a client that answers
 * the HelloRequest late, as JSSE does after COPY IN, would otherwise
 * interleave its next query with its handshake, which OpenSSL rejects).
 * Stop early if application data is waiting (the handshake then finishes
 * in PostgreSQL's own reads).
 *
 * Each attempt waits SSLR_RENEGOTIATION_WAIT_MS in all, however many safe
 * points it spans.  A client may ignore a HelloRequest (RFC 5246 7.4.1.1):
 * once that time is spent the attempt counts as failed and no safe point
 * waits for it again, but the window stays open, so a late answer still
 * completes the renegotiation.  A handshake that fails has killed the
 * connection: say why.
 */
void
sslr_renegotiation_drive(void)
{
	SslrRenegotiationState *rn = &sslr_renegotiation;
	bool		failed = false;
	unsigned long ecode = 0;

	if (rn->wait_over || rn->dying)
		return;

	sslr_rotation_cost_begin();
	if (rn->deadline == 0)
		rn->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   SSLR_RENEGOTIATION_WAIT_MS);
	while (rn->in_flight && !rn->peer_refused)
	{
		char		peek;
		int			r;
		int			err;
		int			waitfor;
		long		remaining;

		ERR_clear_error();
		r = SSL_peek(sslr_renegotiation.ssl, &peek, 1);
		err = SSL_get_error(sslr_renegotiation.ssl, r);
		if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL)
			ecode = ERR_peek_last_error();
		ERR_clear_error();

		if (r > 0 || !rn->in_flight)
		{
			/* counted once per renegotiation, however often it waits */
			if (r > 0 && rn->in_flight && !rn->deferred)
			{
				rn->deferred = true;
				sslr_publish_renegotiation_deferred();
			}
			break;
		}
		if (err == SSL_ERROR_WANT_READ)
			waitfor = WL_SOCKET_READABLE;
		else if (err == SSL_ERROR_WANT_WRITE)
			waitfor = WL_SOCKET_WRITEABLE;
		else
		{
			failed = true;
			break;
		}

		/*
		 * An interrupt that must not wait for the client: leave it pending
		 * (see the file header), with the latch set again for whoever waits
		 * next.  A backend that is to die waits for nothing any more.
		 */
		if (QueryCancelPending || ProcDiePending)
		{
			rn->dying = ProcDiePending;
			SetLatch(MyLatch);
			break;
		}

		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
													rn->deadline);
		if (remaining <= 0)
		{
			rn->wait_over = true;
			rn->unanswered_pending = true;
			sslr_want_safe_point();
			sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
			break;
		}
		if (WaitLatchOrSocket(MyLatch, waitfor | WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							  sslr_renegotiation.port->sock, remaining, WAIT_EVENT_SSL_OPEN_SERVER) & WL_LATCH_SET)
			ResetLatch(MyLatch);
	}
	sslr_rotation_cost_end();

	if (rn->peer_refused || failed)
		rn->in_flight = false;	/* this attempt is over, and said below */
	if (rn->peer_refused)
	{
		rn->peer_refused = false;	/* said here, not at exit */
		ereport(FATAL,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("client refused TLS renegotiation"),
				 errdetail("ssl_renegotiate.tls12 is \"renegotiate\" and the client (user \"%s\", application \"%s\") answered with a no_renegotiation alert.",
						   sslr_renegotiation.port->user_name, sslr_application_name()),
				 errhint("This client cannot renegotiate. Exempt its role with ALTER ROLE %s SET ssl_renegotiate.tls12 = 'warn', or have it use TLS 1.3.",
						 quote_identifier(sslr_renegotiation.port->user_name))));
	}
	if (failed)
	{
		const char *reason = ecode ? ERR_reason_error_string(ecode) : NULL;

		sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
		ereport(FATAL,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("TLS renegotiation failed: %s",
						reason ? reason : "connection lost"),
				 sslr_errdetail_broken_off(), sslr_errhint_exempt()));
	}
}

/* What a renegotiation the client broke off says, at once or at exit. */
static int
sslr_errdetail_broken_off(void)
{
	return errdetail("The client (user \"%s\", application \"%s\") closed the connection or broke off the handshake that ssl_renegotiate.tls12 = \"renegotiate\" started.",
					 sslr_renegotiation.port->user_name, sslr_application_name());
}

static int
sslr_errhint_exempt(void)
{
	return errhint("If this client cannot renegotiate, exempt its role with ALTER ROLE %s SET ssl_renegotiate.tls12 = 'warn', or have it use TLS 1.3.",
				   quote_identifier(sslr_renegotiation.port->user_name));
}

/* The client's application_name, for messages that name it. */
static const char *
sslr_application_name(void)
{
	return application_name && application_name[0] ? application_name : "(unset)";
}

/*
 * At backend exit.  A client that drops the connection on our HelloRequest
 * (pgbouncer) is often seen first by one of PostgreSQL's own writes, which
 * logs only "connection to client lost": say why.  An attempt whose wait
 * was over has been counted as failed already.
 */
void
sslr_renegotiation_lost_at_exit(void)
{
	if (!sslr_renegotiation.in_flight || !ClientConnectionLost)
		return;
	if (!sslr_renegotiation.wait_over)
		sslr_count(&sslr_my_slot->stats.tally.rekey_failures, 1);
	ereport(LOG_SERVER_ONLY,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("ssl_renegotiate: connection of pid %d lost during a TLS renegotiation",
					MyProcPid),
			 sslr_errdetail_broken_off(), sslr_errhint_exempt(),
			 errhidestmt(true), errhidecontext(true)));
}

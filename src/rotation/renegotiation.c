/*-------------------------------------------------------------------------
 *
 * renegotiation.c
 *	  TLS 1.2 key rotation: a server-initiated renegotiation, from the
 *	  HelloRequest to both Finished messages, with its state, the bounded
 *	  wait for the client's half at a blocking send point, and what a
 *	  renegotiation the client broke off says.
 *
 * PostgreSQL sets SSL_OP_NO_RENEGOTIATION.  It is cleared on this one
 * connection only while our own renegotiation is in flight, so
 * client-initiated renegotiation stays refused.  Session tickets are lifted
 * with it (see sslr_renegotiation_setup), so renegotiations after the first
 * are abbreviated.  A renegotiation is done when both Finished messages
 * have passed.
 *
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
 * Invariants:
 *	- The state (sslr_renegotiation) is this backend's own and this
 *	  file's: other modules ask (sslr_renegotiation_in_flight, _waiting,
 *	  _started_ago) and tell (the callbacks' events), never write it.
 *	- sslr_renegotiation_start sets flags only, so it may run on the
 *	  inbound record path; the HelloRequest goes out with the next SSL call.
 *	- OpenSSL's error queue is left as it was found (ERR_set_mark /
 *	  ERR_pop_to_mark), except around the call whose result goes to
 *	  SSL_get_error: that one starts from an empty queue, as PostgreSQL's
 *	  own reads and writes do, so that another library's leftover is not
 *	  taken for ours.
 *	- What happens inside OpenSSL's callbacks (the end of the handshake, a
 *	  changed cipher, an alert) is noted and said at the next safe point.
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
#include <openssl/tls1.h>

#include "compat.h"
#include "rotation/rekey_log.h"
#include "rotation/renegotiation.h"
#include "stats/slots.h"
#include "thresholds.h"

/* How long the send side waits for a client to take part in renegotiation. */
#define SSLR_RENEGOTIATION_WAIT_MS 10000

/* This connection's renegotiations (TLS 1.2), written by this backend only. */
typedef struct SslrRenegotiationState
{
	Port	   *port;			/* the connection, once set up (TLS 1.2) */
	SSL		   *ssl;
	uint64		window_options; /* options lifted while ours runs */
	bool		in_flight;
	int			finished_seen;	/* bit 1: ours, bit 2: the client's */
	bool		wait_over;		/* this attempt waited all it may */
	bool		deferred;		/* ... and was put off for waiting data */
	bool		dying;			/* a termination is pending: wait no more */
	TimestampTz started;		/* when we asked for it */
	TimestampTz deadline;
	bool		verify_peer_pending;
	bool		peer_refused;
	bool		unanswered_pending; /* to be logged */
	bool		cipher_change_pending;	/* to be logged */
	char		previous_cipher[SSLR_CIPHER_LEN];
} SslrRenegotiationState;

/* This connection's renegotiation, if any: this backend's, this file's. */
static SslrRenegotiationState sslr_renegotiation;

static const char *sslr_application_name(void);
static int	sslr_errdetail_broken_off(void);
static int	sslr_errhint_exempt(void);

/*
 * Renegotiations after the first resume the session they created:
 * OpenSSL resumes a session of a server that verifies client certificates
 * only within a session id context; make it this connection's own, so that
 * a ticket is good on no other one.  The options lifted while our own
 * renegotiation runs are renegotiation itself and session tickets, so that
 * the first renegotiation (a full handshake) hands the client a ticket and
 * the later ones resume it (an abbreviated handshake: new keys from the
 * same master secret and fresh randoms, like a TLS 1.3 KeyUpdate, at a
 * fraction of the cost).  New connections still get neither: the context
 * keeps both options.
 */
void
sslr_renegotiation_setup(Port *port)
{
	SSL		   *ssl = port->ssl;
	unsigned char context[SSL_MAX_SID_CTX_LENGTH];
	int64		start = (int64) MyStartTimestamp;
	int32		pid = MyProcPid;

	StaticAssertStmt(sizeof(start) + sizeof(pid) <= SSL_MAX_SID_CTX_LENGTH,
					 "session id context too small");
	memcpy(context, &pid, sizeof(pid));
	memcpy(context + sizeof(pid), &start, sizeof(start));

	sslr_renegotiation.port = port;
	sslr_renegotiation.ssl = ssl;
	sslr_renegotiation.window_options = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET;
	ERR_set_mark();
	if (!SSL_set_session_id_context(ssl, context, sizeof(pid) + sizeof(start)))
		sslr_renegotiation.window_options = SSL_OP_NO_RENEGOTIATION;	/* full handshakes, then */
	ERR_pop_to_mark();
}

/* Start a renegotiation: flags only, so this may run on the inbound path. */
bool
sslr_renegotiation_start(SSL *ssl)
{
	SslrRenegotiationState *rn = &sslr_renegotiation;
	int			ok;

	/*
	 * PostgreSQL 19 picks a certificate by SNI in a client-hello callback
	 * that it sets on the context.  It has done its work in the first
	 * handshake (the certificate is now this connection's own) and cannot
	 * take part in a renegotiation: it crashes there.  The context is this
	 * backend's copy, serving this one connection.
	 */
	SSL_CTX_set_client_hello_cb(SSL_get_SSL_CTX(ssl), NULL, NULL);

	ERR_set_mark();
	SSL_clear_options(ssl, rn->window_options);
	ok = SSL_renegotiate(ssl);
	if (!ok)
		SSL_set_options(ssl, rn->window_options);
	ERR_pop_to_mark();

	if (!ok)
		return false;
	rn->in_flight = true;
	rn->wait_over = false;
	rn->deferred = false;
	rn->started = GetCurrentTimestamp();
	rn->deadline = 0;
	rn->finished_seen = 0;
	sslr_slot_publish_rekey_pending(true);
	return true;
}

/* At a send point: start one, send the HelloRequest, drive it if we may. */
bool
sslr_renegotiation_now(bool may_block)
{
	if (!sslr_renegotiation_start(sslr_renegotiation.ssl))
		return false;

	sslr_rekey_log_cost_begin();
	ERR_set_mark();
	/* sends the HelloRequest */
	(void) SSL_do_handshake(sslr_renegotiation.ssl);
	ERR_pop_to_mark();
	sslr_rekey_log_cost_end();

	if (may_block)
		sslr_renegotiation_drive();
	return true;
}

/* Is our renegotiation in flight? */
bool
sslr_renegotiation_in_flight(void)
{
	return sslr_renegotiation.in_flight;
}

/* ... and may a blocking safe point still wait for it? */
bool
sslr_renegotiation_waiting(void)
{
	return sslr_renegotiation.in_flight && !sslr_renegotiation.wait_over;
}

/* Microseconds since our renegotiation in flight was asked for. */
int64
sslr_renegotiation_started_ago(TimestampTz now)
{
	return Max(now - sslr_renegotiation.started, 0);
}

/*
 * A handshake message passed (inside OpenSSL).  Returns true when it ends
 * our renegotiation: both Finished messages have passed, in either order.
 */
bool
sslr_renegotiation_finished(int write_p, int msg_type)
{
	SslrRenegotiationState *rn = &sslr_renegotiation;

	if (!rn->in_flight || msg_type != SSL3_MT_FINISHED)
		return false;
	rn->finished_seen |= write_p ? 1 : 2;
	if (rn->finished_seen != 3)
		return false;

	SSL_set_options(sslr_renegotiation.ssl, rn->window_options);
	rn->in_flight = false;
	rn->verify_peer_pending = true;
	sslr_want_safe_point();
	sslr_slot_publish_rekey_pending(false);
	return true;
}

/*
 * After a renegotiation: a full one may have agreed on another cipher.
 * The slot shows the one in force; the change is logged at the next safe
 * point (this runs inside OpenSSL).
 */
void
sslr_renegotiation_note_cipher(void)
{
	SslrRenegotiationState *rn = &sslr_renegotiation;
	const char *cipher = SSL_get_cipher_name(sslr_renegotiation.ssl);

	if (strcmp(cipher, sslr_my_slot->cipher) == 0)
		return;
	strlcpy(rn->previous_cipher, sslr_my_slot->cipher, sizeof(rn->previous_cipher));
	sslr_slot_publish_cipher(sslr_renegotiation.ssl);
	rn->cipher_change_pending = true;
	sslr_want_safe_point();
}

/* A no_renegotiation alert: ours to a client, or a client's to us. */
void
sslr_renegotiation_alert(int write_p, int level, int description)
{
	if (description != SSL_AD_NO_RENEGOTIATION)
		return;

	if (write_p && level == SSL3_AL_WARNING)
	{
		/* OpenSSL refused a client-initiated renegotiation for us */
		sslr_slot_add(&sslr_my_slot->stats.tally.peer_renegotiations_refused, 1);
	}
	else if (!write_p && sslr_renegotiation.in_flight)
	{
		/* the client refused ours; OpenSSL ends the connection */
		sslr_renegotiation.peer_refused = true;
		sslr_slot_add(&sslr_my_slot->stats.tally.rekey_failures, 1);
	}
}

static void
sslr_verify_peer_unchanged(void)
{
	X509	   *now = sslr_get1_peer_certificate(sslr_renegotiation.ssl);
	bool		same;

	/*
	 * With SSL_VERIFY_CLIENT_ONCE a full renegotiation asks for no
	 * certificate, so none is fine; a different one is not.
	 */
	same = now == NULL ||
		(sslr_renegotiation.port->peer != NULL && X509_cmp(now, sslr_renegotiation.port->peer) == 0);
	if (now)
		X509_free(now);
	if (!same)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("client certificate changed during TLS renegotiation")));
}

static void
sslr_log_cipher_change(int64 record_limit)
{
	char		limit[64];

	if (record_limit == SSLR_NO_LIMIT)
		strlcpy(limit, "no record limit", sizeof(limit));
	else
		snprintf(limit, sizeof(limit), "a new key every %lld records at most",
				 (long long) record_limit);
	ereport(LOG_SERVER_ONLY,
			(errmsg("ssl_renegotiate: TLS renegotiation of pid %d changed the cipher from %s to %s",
					MyProcPid, sslr_renegotiation.previous_cipher, sslr_my_slot->cipher),
			 errdetail("The new cipher's confidentiality limit applies: %s.", limit),
			 errhidestmt(true), errhidecontext(true)));
}

static void
sslr_log_unanswered(void)
{
	ereport(LOG_SERVER_ONLY,
			(errmsg("ssl_renegotiate: client of pid %d did not answer the TLS renegotiation request within %d ms; the connection goes on under its current keys",
					MyProcPid, SSLR_RENEGOTIATION_WAIT_MS),
			 errdetail("The server waits for it no more; the client may still answer later."),
			 errhidestmt(true), errhidecontext(true)));
}

static void
sslr_log_notes(int64 record_limit)
{
	SslrRenegotiationState *rn = &sslr_renegotiation;

	if (rn->cipher_change_pending)
	{
		rn->cipher_change_pending = false;
		sslr_log_cipher_change(record_limit);
	}
	if (rn->unanswered_pending)
	{
		rn->unanswered_pending = false;
		sslr_log_unanswered();
	}
}

/* At a safe point: what was noted inside OpenSSL. */
void
sslr_renegotiation_safe_point(int64 record_limit)
{
	sslr_log_notes(record_limit);
	if (sslr_renegotiation.verify_peer_pending)
	{
		sslr_renegotiation.verify_peer_pending = false;
		sslr_verify_peer_unchanged();
	}
}

/* At backend exit: what is still to be said. */
void
sslr_renegotiation_at_exit(int64 record_limit)
{
	sslr_log_notes(record_limit);
	if (sslr_renegotiation.peer_refused)
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("ssl_renegotiate: client of pid %d refused TLS renegotiation; OpenSSL ended the connection",
						MyProcPid),
				 errhint("Set ssl_renegotiate.tls12 to \"warn\" for clients that cannot renegotiate."),
				 errhidestmt(true), errhidecontext(true)));
	else
		sslr_renegotiation_lost_at_exit();
}

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

	sslr_rekey_log_cost_begin();
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
				sslr_slot_publish_renegotiation_deferred();
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
			sslr_slot_add(&sslr_my_slot->stats.tally.rekey_failures, 1);
			break;
		}
		if (WaitLatchOrSocket(MyLatch, waitfor | WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							  sslr_renegotiation.port->sock, remaining, WAIT_EVENT_SSL_OPEN_SERVER) & WL_LATCH_SET)
			ResetLatch(MyLatch);
	}
	sslr_rekey_log_cost_end();

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

		sslr_slot_add(&sslr_my_slot->stats.tally.rekey_failures, 1);
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
		sslr_slot_add(&sslr_my_slot->stats.tally.rekey_failures, 1);
	ereport(LOG_SERVER_ONLY,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("ssl_renegotiate: connection of pid %d lost during a TLS renegotiation",
					MyProcPid),
			 sslr_errdetail_broken_off(), sslr_errhint_exempt(),
			 errhidestmt(true), errhidecontext(true)));
}

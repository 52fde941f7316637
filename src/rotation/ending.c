/*-------------------------------------------------------------------------
 *
 * ending.c
 *	  Ending a connection at a limit.
 *
 * A limit reached at a send point ends the connection at once, with a
 * FATAL that says why (sslr_ending_terminate).  One reached on the inbound
 * record path, inside SSL_read, can neither ereport nor block: the TLS
 * connection is marked as shut down by the peer (a flag), so OpenSSL
 * processes nothing more of what is waiting and the read reports end of
 * connection, and the connection is marked lost, so that the next
 * CHECK_FOR_INTERRUPTS ends the backend before it runs anything more
 * (sslr_ending_defer).  PostgreSQL then ends it as if the client had gone;
 * the lines it logs about that lost client (SQLSTATE class 08: "unexpected
 * EOF", "connection to client lost", "protocol synchronization was lost")
 * are left out of the server log (sslr_ending_hides, from emit_log_hook),
 * and nothing it sends reaches the client (sendpoint.c).  The reason is
 * said at exit: by policy.c's exit callback once the connection is
 * authenticated, as a FATAL for hard_limit, sent to the client too, under
 * the current key and without blocking, unless our own key is past its
 * limit or in a handshake (ereport(FATAL) from a before_shmem_exit
 * callback: PostgreSQL runs the remaining callbacks and exits); before
 * authentication, as a LOG, by an exit handler registered once at
 * start-up (sslr_ending_init), since nothing may be registered inside
 * OpenSSL.
 *
 * Invariants:
 *	- Called inside OpenSSL's callbacks, sslr_ending_defer only sets
 *	  flags: no ereport, no allocation, nothing registered.
 *	- A connection is ended once; what is decided after that is ignored.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq/libpq.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"

#include <stdlib.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "rotation/ending.h"
#include "rotation/key_limits.h"
#include "settings/settings.h"
#include "stats/slots.h"
#include "thresholds.h"

/* after the FATAL: how long what the client still sends is read away */
#define SSLR_LINGER_MS		3000	/* in all */
#define SSLR_LINGER_QUIET_MS 1000	/* once it sends nothing */

typedef struct SslrEndingState
{
	bool		attached;		/* policy.c's exit callback calls ours */
	bool		client_dest;	/* errors went to the client at attach */
	bool		hiding;			/* PostgreSQL's lost-client lines: see header */
	SslrEndReason deferred;		/* what the inbound path decided and could not
								 * do */
	int64		deferred_amount;
} SslrEndingState;

static SslrEndingState sslr_ending;

static void sslr_log_deferred_termination(void);

/*
 * Exit of a backend ended before authentication (no slot, no policy): an
 * atexit handler, since PostgreSQL's exit callbacks are registered per
 * process and the record callback, inside OpenSSL, may register nothing.
 * It runs after PostgreSQL's own exit callbacks, where logging still works.
 * Every process inherits it from the postmaster; it says something only in
 * a backend whose connection the inbound path ended.
 */
static void
sslr_termination_at_exit(void)
{
	sslr_log_deferred_termination();
}

/* At start-up (the postmaster's _PG_init): before any connection exists. */
void
sslr_ending_init(void)
{
	static bool registered = false;

	if (registered)
		return;
	if (atexit(sslr_termination_at_exit) != 0)
		ereport(WARNING,
				(errmsg("ssl_renegotiate: could not register an exit handler"),
				 errdetail("Connections ended by a limit before authentication will end without a log line.")));
	registered = true;
}

/*
 * The connection is authenticated: from now on policy.c's exit callback
 * says what this file has to say at exit (sslr_ending_at_exit).
 */
void
sslr_ending_setup(void)
{
	sslr_ending.attached = true;
	sslr_ending.client_dest = (whereToSendOutput == DestRemote);
}

/*
 * End the session from the inbound record path, where we can neither block
 * nor ereport.  Marking the TLS connection as shut down by the peer (a flag
 * only) makes OpenSSL process nothing more of what is waiting in the
 * socket, and the read report end of connection: a backend in the middle of
 * a message, or of a COPY, ends as if the client had gone, rolling back.
 * The next CHECK_FOR_INTERRUPTS ends an idle one as a lost connection, and
 * the latch wakes it.  Nothing more is sent to this client but the FATAL
 * that says why, at exit.
 */
static void
sslr_end_connection(SSL *ssl)
{
	SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
	if (!sslr_ending.attached)
		return;					/* said by sslr_termination_at_exit */
	sslr_ending.hiding = true;
	InterruptPending = true;
	ClientConnectionLost = true;
	SetLatch(MyLatch);
}

/*
 * A limit was reached on the inbound path: end the connection, and keep
 * the reason (with amount: bytes, or key updates) for the log at exit.
 */
void
sslr_ending_defer(SSL *ssl, SslrEndReason reason, int64 amount)
{
	SslrEndingState *ending = &sslr_ending;

	if (ending->deferred != SSLR_END_NONE)
		return;
	ending->deferred = reason;
	ending->deferred_amount = amount;
	sslr_slot_add(&sslr_my_slot->stats.tally.terminations, 1);
	sslr_end_connection(ssl);
}

/* The FATAL that ends a connection at a limit: bytes under the key of dir. */
static void
sslr_fatal(SslrDirection dir, SslrEndReason reason, int64 bytes)
{
	if (reason == SSLR_END_TLS12_REQUEST)
		ereport(FATAL,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("terminating connection because an operator asked to rotate its TLS 1.2 keys"),
				 errdetail("ssl_renegotiate.tls12 is \"terminate\"."),
				 errhint("Connect with TLS 1.3, or change ssl_renegotiate.tls12.")));
	if (reason == SSLR_END_TLS12)
		ereport(FATAL,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("terminating connection because its TLS 1.2 keys reached ssl_renegotiate.byte_limit"),
				 errdetail("%lld bytes were %s under one key; ssl_renegotiate.tls12 is \"terminate\".",
						   (long long) bytes, dir == SSLR_SENT ? "sent" : "received"),
				 errhint("Connect with TLS 1.3, or change ssl_renegotiate.tls12.")));
	ereport(FATAL,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("terminating connection because more than ssl_renegotiate.hard_limit was %s under one TLS key",
					dir == SSLR_SENT ? "sent" : "received"),
			 errdetail("%lld bytes under one key; ssl_renegotiate.hard_limit is %s.",
					   (long long) bytes, sslr_key_limits_format_bytes(sslr_key_limits_hard_limit())),
			 errhint(sslr_key_limits_byte_limit() > 0 ?
					 "Keys rotate from ssl_renegotiate.byte_limit (%s) on; ssl_renegotiate.hard_limit must stay above it by more than the client's lag in answering a key update (%s on this connection). Raise hard_limit, or set it to 0." :
					 "ssl_renegotiate.byte_limit is %s (off), so keys do not rotate by bytes; set it below ssl_renegotiate.hard_limit by more than the client's lag in answering a key update (%s on this connection), or set hard_limit to 0.",
					 sslr_key_limits_format_bytes(sslr_key_limits_byte_limit()),
					 sslr_key_limits_peer_lag() > 0 ?
					 sslr_key_limits_format_bytes(sslr_key_limits_peer_lag()) : "none measured")));
}

/* End the connection from a safe point, with the reason. */
void
sslr_ending_terminate(SslrDirection dir, SslrEndReason reason)
{
	sslr_slot_add(&sslr_my_slot->stats.tally.terminations, 1);
	sslr_fatal(dir, reason, sslr_my_slot->stats.bytes_under_key[dir]);
}

/*
 * emit_log_hook: leave a line out of the server log?  Once the inbound
 * path ended an authenticated connection, PostgreSQL's lines about the
 * client it believes gone (SQLSTATE class 08) are left out: the FATAL at
 * exit says what happened.
 */
bool
sslr_ending_hides(const ErrorData *edata)
{
	return sslr_ending.hiding &&
		ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION;
}

/* Say why the inbound path ended the connection, if it did. */
static void
sslr_log_deferred_termination(void)
{
	SslrEndingState *ending = &sslr_ending;

	if (ending->deferred == SSLR_END_NONE)
		return;
	if (ending->deferred == SSLR_END_KEY_UPDATE_FLOOD)
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("ssl_renegotiate: terminated connection of pid %d: the client sent %lld key updates unasked, faster than ssl_renegotiate.max_peer_key_updates (%d) allows",
						MyProcPid, (long long) ending->deferred_amount,
						sslr_max_peer_key_updates),
				 errdetail("A client may send that many at once, and one more for every %d bytes it sends and every second.",
						   SSLR_PEER_UPDATE_BYTES),
				 errhidestmt(true), errhidecontext(true)));
	else if (ending->deferred == SSLR_END_TLS12)
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("ssl_renegotiate: terminated connection of pid %d: its TLS 1.2 keys reached ssl_renegotiate.byte_limit after %lld bytes received",
						MyProcPid, (long long) ending->deferred_amount),
				 errdetail("ssl_renegotiate.tls12 is \"terminate\"."),
				 errhidestmt(true), errhidecontext(true)));
	else
		ereport(LOG_SERVER_ONLY,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("ssl_renegotiate: terminated connection of pid %d: the client sent %lld bytes under one TLS key, more than ssl_renegotiate.hard_limit (%s)",
						MyProcPid, (long long) ending->deferred_amount,
						sslr_key_limits_format_bytes(sslr_key_limits_hard_limit())),
				 errhidestmt(true), errhidecontext(true)));
	ending->deferred = SSLR_END_NONE;	/* said once */
}

/*
 * After the FATAL, before the socket is closed (an on_proc_exit callback,
 * so it runs before PostgreSQL's socket_close): read away, undecrypted and
 * uncounted, what the client is still sending, until it stops or closes,
 * for SSLR_LINGER_MS at most (or until the postmaster dies).  A client that
 * reads nothing while it writes (pgjdbc sending a large message) then
 * finishes its writes and reads the FATAL; closed with unread data, the
 * socket would answer its writes with a reset first (a lingering close, as
 * HTTP servers do).
 */
static void
sslr_linger(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	char		discard[65536];
	instr_time	start;
	instr_time	now;
	long		left;

	if (MyProcPort == NULL || MyProcPort->sock == PGINVALID_SOCKET)
		return;
	INSTR_TIME_SET_CURRENT(start);
	for (;;)
	{
		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		left = SSLR_LINGER_MS - (long) INSTR_TIME_GET_MILLISEC(now);
		if (left <= 0 ||
			!(WaitLatchOrSocket(NULL, WL_SOCKET_READABLE | WL_TIMEOUT | WL_POSTMASTER_DEATH,
								MyProcPort->sock, Min(left, SSLR_LINGER_QUIET_MS),
								WAIT_EVENT_CLIENT_READ) & WL_SOCKET_READABLE) ||
			recv(MyProcPort->sock, discard, sizeof(discard), 0) <= 0)
			return;
	}
}

/*
 * At backend exit: what could not be said on the inbound path.  The hard
 * limit is said with the FATAL of the send side, which does not return, to
 * the client too if may_send (policy.c: our key is within its limit and in
 * no handshake): one message, under the current key, without blocking (a
 * client that reads nothing does not hold the backend in its exit).
 */
void
sslr_ending_at_exit(bool may_send)
{
	SslrEndingState *ending = &sslr_ending;
	int64		bytes = ending->deferred_amount;

	if (ending->deferred != SSLR_END_HARD_LIMIT)
	{
		ending->hiding = false; /* the LOG may be of class 08 */
		sslr_log_deferred_termination();
		return;
	}
	ending->deferred = SSLR_END_NONE;	/* said once */
	whereToSendOutput = DestNone;
	if (may_send && ending->client_dest && MyProcPort != NULL)
	{
		/*
		 * The lost connection was ours: now sendpoint.c lets writes through,
		 * and at exit it flushes without blocking.  What PostgreSQL left in
		 * its buffer (a ParseComplete, say) goes first; the FATAL only if it
		 * all went, so that the FATAL itself fits in the buffer.
		 */
		ClientConnectionLost = false;
		if (pq_flush_if_writable() == 0 && !pq_is_send_pending())
		{
			whereToSendOutput = DestRemote;
			on_proc_exit(sslr_linger, (Datum) 0);
		}
	}
	sslr_fatal(SSLR_RECEIVED, SSLR_END_HARD_LIMIT, bytes);
}

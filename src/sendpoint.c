/*-------------------------------------------------------------------------
 *
 * sendpoint.c
 *	  The send side's safe points: PostgreSQL's PqCommMethods, wrapped.
 *
 * A key may change only between two SSL_write calls, never inside one.
 * Every protocol message PostgreSQL sends, and every flush, passes through
 * PqCommMethods: each passage is a safe point.  Its fast path is one
 * comparison, of the bytes sent under the current key with a threshold
 * that policy.c keeps current (it is zeroed whenever anything needs
 * attention); only when it fires does policy.c look further.
 *
 * Invariants:
 *	- Nothing reached from putmessage_noblock or flush_if_writable blocks.
 *	- Each message passes one safe point: PostgreSQL's putmessage_noblock
 *	  makes room in its buffer and then calls putmessage through
 *	  PqCommMethods, the same message, already past its safe point.
 *	- Once the connection is lost (PostgreSQL's ClientConnectionLost) no
 *	  write goes out: OpenSSL keeps a failed record pending and rejects a
 *	  shorter retry ("SSL error: bad length").  The peer is gone, so nothing
 *	  it could read is lost.  A client killed with our KeyUpdate request
 *	  unread answers with a RST, which makes the first write fail.
 *	- Safe points do not nest, and do nothing once the backend exits.
 *	- At exit nothing blocks: a flush then sends only what the socket
 *	  takes at once (the FATAL of a limit reached on the inbound path,
 *	  ending.c), since no signal can end a backend that waits then.
 *	- A safe point processes no interrupt (no CHECK_FOR_INTERRUPTS, not
 *	  even in a wait): PostgreSQL's own write path below handles a
 *	  termination as it always does, and a cancel or statement_timeout
 *	  waits for its next CHECK_FOR_INTERRUPTS (see renegotiation.c).
 *	- What sends nothing (is_send_pending) is left as it was; comm_reset,
 *	  which PostgreSQL's error recovery calls after disarming every timeout,
 *	  is reported to interval.c.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq/libpq.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"

#include "rotation/interval.h"
#include "rotation/policy.h"
#include "sendpoint.h"
#include "stats/slots.h"
#include "thresholds.h"

/* The wrapped PqCommMethods of this connection. */
typedef struct SslrSendPointState
{
	bool		installed;
	PQcommMethods prev;			/* what we wrapped, copied */
	PQcommMethods comm;
	bool		busy;			/* inside a safe point: no nesting */
	bool		in_noblock;		/* inside PostgreSQL's putmessage_noblock */
} SslrSendPointState;

static SslrSendPointState sslr_sendpoint;

/* The one comparison of the fast path, and the lost connection. */
static inline bool
sslr_send_attention(void)
{
	return unlikely((sslr_my_slot->stats.bytes_under_key[SSLR_SENT] >=
					 sslr_attention_bytes[SSLR_SENT]) | ClientConnectionLost);
}

static void
sslr_send_point(bool may_block)
{
	SslrSendPointState *sp = &sslr_sendpoint;

	if (sp->busy || proc_exit_inprogress)
		return;
	sp->busy = true;
	PG_TRY();
	{
		sslr_policy_send_point(may_block);
	}
	PG_FINALLY();
	{
		sp->busy = false;
	}
	PG_END_TRY();
}

/*
 * The slow paths, out of line: a safe point, or a lost connection.  The
 * fast paths then compile to loads, one comparison and a tail call.
 */
static pg_noinline int
sslr_flush_slow(bool may_block)
{
	if (ClientConnectionLost)
		return EOF;
	sslr_send_point(may_block);
	return may_block && !proc_exit_inprogress ? sslr_sendpoint.prev.flush() :
		sslr_sendpoint.prev.flush_if_writable();
}

static pg_noinline int
sslr_putmessage_slow(char msgtype, const char *s, size_t len)
{
	if (ClientConnectionLost)
		return EOF;
	if (!sslr_sendpoint.in_noblock)
		sslr_send_point(true);
	return sslr_sendpoint.prev.putmessage(msgtype, s, len);
}

static int
sslr_comm_flush(void)
{
	if (sslr_send_attention() || unlikely(proc_exit_inprogress))
		return sslr_flush_slow(true);
	return sslr_sendpoint.prev.flush();
}

static int
sslr_comm_flush_if_writable(void)
{
	if (sslr_send_attention())
		return sslr_flush_slow(false);
	return sslr_sendpoint.prev.flush_if_writable();
}

static int
sslr_comm_putmessage(char msgtype, const char *s, size_t len)
{
	if (sslr_send_attention())
		return sslr_putmessage_slow(msgtype, s, len);
	return sslr_sendpoint.prev.putmessage(msgtype, s, len);
}

/*
 * The inner putmessage call is recognised by a flag.  An ERROR inside
 * leaves it set, but PostgreSQL's error recovery resets the communication
 * layer next, and sslr_comm_reset clears it.
 */
static void
sslr_comm_putmessage_noblock(char msgtype, const char *s, size_t len)
{
	SslrSendPointState *sp = &sslr_sendpoint;

	if (sslr_send_attention())
	{
		if (ClientConnectionLost)
			return;
		sslr_send_point(false);
	}
	sp->in_noblock = true;
	sp->prev.putmessage_noblock(msgtype, s, len);
	sp->in_noblock = false;
}

static void
sslr_comm_reset(void)
{
	sslr_sendpoint.in_noblock = false;
	sslr_interval_comm_reset();
	sslr_sendpoint.prev.comm_reset();
}

/* The connection is authenticated: wrap what PostgreSQL sends through. */
void
sslr_sendpoint_attach(void)
{
	SslrSendPointState *sp = &sslr_sendpoint;

	if (sp->installed)
		return;
	sp->installed = true;
	sp->prev = *PqCommMethods;
	sp->comm = *PqCommMethods;
	sp->comm.comm_reset = sslr_comm_reset;
	sp->comm.flush = sslr_comm_flush;
	sp->comm.flush_if_writable = sslr_comm_flush_if_writable;
	sp->comm.putmessage = sslr_comm_putmessage;
	sp->comm.putmessage_noblock = sslr_comm_putmessage_noblock;
	PqCommMethods = &sp->comm;
}

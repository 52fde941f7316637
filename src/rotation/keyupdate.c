/*-------------------------------------------------------------------------
 *
 * keyupdate.c
 *	  TLS 1.3 key rotation: KeyUpdate both ways.
 *
 *	- Our sending key: SSL_key_update(NOT_REQUESTED) at a safe point
 *	  between two SSL_write calls, sent at once.  Never REQUESTED there:
 *	  during COPY TO the server does not read, so the peer's answer would
 *	  pile up until both sides block.
 *	- The peer's sending key: SSL_key_update(REQUESTED) from the inbound
 *	  record path (inside SSL_read, where it only sets a flag), with at most
 *	  one request outstanding: asking again before the peer answered breaks
 *	  libpq.  The lag between a request and its answer is learnt, so that
 *	  policy.c can ask that much earlier.
 *	- KeyUpdates the peer sends unasked each make us derive a key: a budget
 *	  bounds them (sslr_keyupdate_unasked_allowed).
 *	- Our own KeyUpdates are counted in a row until we send application
 *	  data (policy.c stops at SSLR_MAX_KEY_UPDATES_IN_ROW), and their
 *	  times kept: a client that ends the connection soon after them gets a
 *	  line at exit with their pace, next to the limits clients are known
 *	  to have (sslr_keyupdate_at_exit).
 *
 * Invariants:
 *	- OpenSSL's error queue is left as it was found (ERR_set_mark /
 *	  ERR_pop_to_mark around every call).
 *	- Nothing here blocks, allocates or ereports: the request runs inside
 *	  SSL_read, and the rest is counted and returned to policy.c.  What our
 *	  own KeyUpdate costs is measured by rekey_log.c (sslr_rekey_log_cost_*),
 *	  for rekey_time and its log line alike.
 *	- The state below is this backend's own; what policy.c needs of it (the
 *	  lag, the count of unasked updates) it gets by asking.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/timestamp.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "rotation/rekey_log.h"
#include "rotation/key_limits.h"
#include "rotation/keyupdate.h"
#include "settings/settings.h"
#include "stats/slots.h"
#include "thresholds.h"

/* our last KeyUpdates' times, for the line at exit */
#define SSLR_SENT_TIMES 16

/* a connection that ends this soon after our last KeyUpdate gets a line */
#define SSLR_END_AFTER_UPDATE_US	(2 * USECS_PER_SEC)

/* This connection's key updates. */
typedef struct SslrKeyUpdateState
{
	/* our one outstanding request to the peer */
	int64		request_at_bytes;
	TimestampTz request_time;
	/* the budget of key updates the peer sends unasked */
	int64		budget_credit;
	int64		budget_bytes;
	TimestampTz budget_time;
	int64		unasked;
	/* our own KeyUpdates, and how the peer ended (for the line at exit) */
	TimestampTz sent_times[SSLR_SENT_TIMES];
	int64		sent;
	int			last_run;		/* in a row, up to the last one */
	bool		peer_ended;
	int			peer_alert;		/* a fatal alert's description, or -1 */
} SslrKeyUpdateState;

static SslrKeyUpdateState sslr_keyupdate = {.peer_alert = -1};

/* Is this OpenSSL error a "not now, try at the next safe point"? */
static bool
sslr_transient_error(unsigned long ecode)
{
	int			reason = ERR_GET_REASON(ecode);

	return reason == SSL_R_BAD_WRITE_RETRY || reason == SSL_R_STILL_IN_INIT;
}

/* Our sending key, at a safe point: rotate it now. */
SslrAttempt
sslr_keyupdate_send(SSL *ssl)
{
	unsigned long ecode = 0;
	int			ok;

	sslr_rekey_log_cost_begin();
	ERR_set_mark();
	ok = SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED);
	if (ok)
	{
		/*
		 * Send it now rather than ahead of the next write, so that what is
		 * buffered goes out under the new key.  If the socket is full the
		 * message stays queued in OpenSSL and the next SSL call sends it.
		 */
		(void) SSL_do_handshake(ssl);
	}
	else
		ecode = ERR_peek_last_error();
	ERR_pop_to_mark();

	/*
	 * Its key derivation and the write of its record: counted, and given to
	 * the log line of the key that changed meanwhile (or, if the message is
	 * still queued, to that of the write that sends it).
	 */
	sslr_rekey_log_cost_end();
	if (ok)
		return SSLR_ATTEMPT_DONE;
	return sslr_transient_error(ecode) ? SSLR_ATTEMPT_RETRY : SSLR_ATTEMPT_FAILED;
}

/* The peer's sending key, from the inbound path: ask for a new one. */
SslrAttempt
sslr_keyupdate_request(SSL *ssl)
{
	unsigned long ecode = 0;
	int			ok;

	ERR_set_mark();
	ok = SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED);
	if (!ok)
		ecode = ERR_peek_last_error();
	ERR_pop_to_mark();

	if (!ok)
		return sslr_transient_error(ecode) ? SSLR_ATTEMPT_RETRY : SSLR_ATTEMPT_FAILED;
	sslr_keyupdate.request_at_bytes = sslr_my_slot->stats.tally.bytes[SSLR_RECEIVED];
	sslr_keyupdate.request_time = GetCurrentTimestamp();
	sslr_slot_publish_rekey_pending(true);
	return SSLR_ATTEMPT_DONE;
}

/*
 * The peer answered our request: learn how late peers answer.  Returns the
 * time from the request to the answer, in microseconds.
 */
int64
sslr_keyupdate_answered(TimestampTz now)
{
	SslrKeyUpdateState *ku = &sslr_keyupdate;

	sslr_key_limits_note_peer_lag(sslr_my_slot->stats.tally.bytes[SSLR_RECEIVED] - ku->request_at_bytes);
	sslr_slot_publish_rekey_pending(false);
	return now - ku->request_time;
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
bool
sslr_keyupdate_unasked_allowed(TimestampTz now)
{
	SslrKeyUpdateState *ku = &sslr_keyupdate;
	int64		capacity = (int64) sslr_max_peer_key_updates * SSLR_PEER_UPDATE_BYTES;
	int64		received = sslr_my_slot->stats.tally.bytes[SSLR_RECEIVED];

	ku->unasked++;
	if (sslr_max_peer_key_updates <= 0)
		return true;

	if (ku->budget_time == 0)
		ku->budget_credit = capacity;
	else
	{
		int64		elapsed = Max(now - ku->budget_time, 0);
		int64		earned = received - ku->budget_bytes;

		earned += (elapsed / USECS_PER_SEC) * SSLR_PEER_UPDATE_BYTES +
			(elapsed % USECS_PER_SEC) * SSLR_PEER_UPDATE_BYTES / USECS_PER_SEC;
		ku->budget_credit = Min(capacity, ku->budget_credit + earned);
	}
	ku->budget_bytes = received;
	ku->budget_time = now;

	if (ku->budget_credit < SSLR_PEER_UPDATE_BYTES)
		return false;
	ku->budget_credit -= SSLR_PEER_UPDATE_BYTES;
	return true;
}

/* Key updates the peer sent unasked so far. */
int64
sslr_keyupdate_unasked(void)
{
	return sslr_keyupdate.unasked;
}

/*
 * A KeyUpdate of ours went out (inside OpenSSL): one more in a row, until
 * we send application data again (sslr_keyupdate_data_sent).
 */
void
sslr_keyupdate_sent(TimestampTz now)
{
	SslrKeyUpdateState *ku = &sslr_keyupdate;

	ku->sent_times[ku->sent % SSLR_SENT_TIMES] = now;
	ku->sent++;
	sslr_sent_updates_in_row++;
	ku->last_run = sslr_sent_updates_in_row;
}

/* We sent a record of application data: the run is over. */
void
sslr_keyupdate_data_sent(void)
{
	sslr_sent_updates_in_row = 0;
}

/*
 * The peer ended the connection with a fatal alert (inside OpenSSL): its
 * description.  An end without one is PostgreSQL's to see (at exit).
 */
void
sslr_keyupdate_peer_ended(int fatal_alert)
{
	sslr_keyupdate.peer_ended = true;
	if (fatal_alert >= 0 && sslr_keyupdate.peer_alert < 0)
		sslr_keyupdate.peer_alert = fatal_alert;
}

/* Our KeyUpdates in the second up to the last one, that one included. */
static int
sslr_sent_in_last_second(void)
{
	const SslrKeyUpdateState *ku = &sslr_keyupdate;
	TimestampTz last = ku->sent_times[(ku->sent - 1) % SSLR_SENT_TIMES];
	int			n = 0;

	for (int64 i = ku->sent - 1; i >= 0 && i >= ku->sent - SSLR_SENT_TIMES; i--)
	{
		if (last - ku->sent_times[i % SSLR_SENT_TIMES] >= USECS_PER_SEC)
			break;
		n++;
	}
	return n;
}

/*
 * At backend exit, outside OpenSSL: a peer that ended the connection (or
 * lost it) soon after our KeyUpdates may have refused their pace; say how
 * fast they came, next to the limits clients are known to have.
 */
void
sslr_keyupdate_at_exit(void)
{
	const SslrKeyUpdateState *ku = &sslr_keyupdate;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz last;
	char		how[128];

	/*
	 * Only when the client ended it: a fatal alert, a lost connection, or the
	 * end of the stream where PostgreSQL read its next message.  Not when the
	 * server ended it (a limit: said by ending.c).
	 */
	if (ku->sent == 0 ||
		!(ku->peer_ended || ClientConnectionLost ||
		  pgStatSessionEndCause == DISCONNECT_CLIENT_EOF) ||
		sslr_my_slot->stats.tally.terminations > 0)
		return;
	last = ku->sent_times[(ku->sent - 1) % SSLR_SENT_TIMES];
	if (now - last > SSLR_END_AFTER_UPDATE_US)
		return;
	if (ku->peer_alert >= 0)
		snprintf(how, sizeof(how), "with a fatal alert (%s) from the client",
				 SSL_alert_desc_string_long(ku->peer_alert));
	else
		strlcpy(how, "by the client without a close_notify", sizeof(how));
	ereport(LOG_SERVER_ONLY,
			(errmsg("ssl_renegotiate: connection of pid %d was ended %s %.3f s after the server's last TLS KeyUpdate",
					MyProcPid, how, (now - last) / 1000000.0),
			 errdetail("The server sent %d KeyUpdates in the second up to its last, the last %d of them in a row without application data between them (%lld in all). Known client limits: GnuTLS ends a connection at the 9th KeyUpdate within 1000 ms, rustls and BoringSSL at the 33rd in a row, Go's crypto/tls after 16 records in a row without application data.",
					   sslr_sent_in_last_second(), ku->last_run,
					   (long long) ku->sent),
			 errhint("ssl_renegotiate.min_rekey_gap (%lld ms in force) bounds the pace; the server sends at most %d KeyUpdates in a row.",
					 (long long) sslr_key_limits_min_gap_ms(), SSLR_MAX_KEY_UPDATES_IN_ROW),
			 errhidestmt(true), errhidecontext(true)));
}

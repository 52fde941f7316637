/*-------------------------------------------------------------------------
 *
 * accounting.c
 *	  Count every TLS record of this connection, in both directions.
 *
 * Records are counted from OpenSSL's message callback, which sees each
 * record header (5 bytes: type, version, length) as it is written or read,
 * from the first byte of the handshake, and each handshake message and
 * alert.  Bytes are counted as they cross the socket:
 *	- sent: a header written means 5 + length bytes on their way out;
 *	- received: what OpenSSL read from the socket, never the length a
 *	  header claims (a header is seen before its body is read, and a body
 *	  may never arrive).  Before authentication, a callback on the
 *	  connection's read BIO counts every read as it happens, since the
 *	  backend may leave by _exit().  After it, the callback is removed (the
 *	  BIO is the write BIO too, and a callback would run on every write) and
 *	  the BIO's own count of bytes read is taken at each received header,
 *	  once its body is read (TLS 1.3 tells, with the record's inner content
 *	  type), at the first sent header after one (TLS 1.2: the body the
 *	  reply answers), and at exit.
 * Both are what the kernel counts for the socket.
 *
 * How the callback gets onto a connection: every SSL object OpenSSL
 * creates in this process calls the "new" function of our ex_data index
 * (registered in _PG_init, so inherited by every backend), which sets the
 * early callback on it; from OpenSSL 3.2 on that function cannot, and the
 * index is one of SSL_CTX instead, whose every SSL starts with the
 * callback (compat.h).  That needs no hook of PostgreSQL's: PostgreSQL 19
 * creates connections from a context the openssl_tls_init_hook never sees,
 * and sets its own client-hello callback.  SSL objects that are not this
 * backend's connection (libpq connections of postgres_fdw or dblink) drop
 * the callback at their first record.
 *
 * Two callbacks: the early one adds each record to the shared sum of
 * connections before authentication too (preauth.c, through slots.c),
 * because a backend may leave before authentication by _exit(), with no
 * chance to report; only privileged readers see that sum.  Once the
 * connection is authenticated and has its shared slot, it switches to the
 * plain one.
 *
 * Invariants of this file:
 *	- The per-record path does no locking, no allocation, no logging and no
 *	  OpenSSL call but BIO_number_read (a getter) on a received header: a
 *	  few plain additions to this backend's own counters (readers take
 *	  them field by field: slots.c), a comparison with the thresholds
 *	  (thresholds.h), and one with the count of operator requests (before
 *	  authentication, instead, atomic additions to the shared sum).  A sent
 *	  header adds one test of a flag.  The read BIO's callback, before
 *	  authentication only, only adds.
 *	- Anything more (a threshold crossed, a KeyUpdate, a handshake message)
 *	  is handed to policy.c, an alert to renegotiation.c; rare by design.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"

#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include "accounting.h"
#include "compat.h"
#include "rotation/ending.h"
#include "rotation/policy.h"
#include "rotation/renegotiation.h"
#include "stats/slots.h"
#include "thresholds.h"

#define SSLR_RECORD_HEADER_LEN 5

/* The read BIO of this backend's connection, once it is watched. */
static BIO *sslr_rbio = NULL;
static BIO_callback_fn_ex sslr_prev_bio_callback = NULL;

/* BIO_number_read(sslr_rbio) counted so far. */
static uint64 sslr_rbio_counted = 0;

/* After authentication: a received header's body may be uncounted. */
static bool sslr_rbio_behind = false;

/*
 * Bytes read from the socket (the read BIO's callback, or its catch-up);
 * before authentication (early) into the shared sum too.
 */
static inline void
sslr_count_received_bytes(int64 bytes, bool early)
{
	SslrConnStats *stats = &sslr_my_slot->stats;

	stats->tally.bytes[SSLR_RECEIVED] += bytes;
	stats->bytes_under_key[SSLR_RECEIVED] += bytes;
	sslr_rbio_counted += (uint64) bytes;
	if (early)
		sslr_slot_add_early(SSLR_RECEIVED, bytes, 0);
}

/* After authentication: count what the read BIO read since last time. */
static void
sslr_catch_up_received(void)
{
	uint64		read = BIO_number_read(sslr_rbio);

	sslr_rbio_behind = false;
	if (read > sslr_rbio_counted)
		sslr_count_received_bytes((int64) (read - sslr_rbio_counted), false);
}

/*
 * One record: its header was written (wire_bytes: header and body), or
 * read (wire_bytes 0: its bytes are counted as they are read).
 */
static inline void
sslr_count_record(SSL *ssl, SslrDirection dir, int64 wire_bytes)
{
	SslrConnStats *stats = &sslr_my_slot->stats;

	stats->tally.bytes[dir] += wire_bytes;
	stats->tally.records[dir]++;
	stats->bytes_under_key[dir] += wire_bytes;
	stats->records_under_key[dir]++;

	/*
	 * Only the inbound path acts here.  The send side is checked at the safe
	 * points of sendpoint.c, never inside an SSL_write, on bytes alone: its
	 * record limit is passed on by zeroing the byte threshold.
	 */
	if (dir == SSLR_RECEIVED)
	{
		if (unlikely(stats->bytes_under_key[dir] >= sslr_attention_bytes[dir] ||
					 stats->records_under_key[dir] >= sslr_attention_records[dir]))
			sslr_policy_receive_attention(ssl);
	}
	else if (unlikely(stats->records_under_key[dir] >= sslr_attention_records[dir]))
		sslr_want_send_attention();
}

static inline void
sslr_handle_message(int write_p, int content_type, const void *buf, size_t len,
					SSL *ssl, bool early)
{
	const unsigned char *p = buf;
	SslrDirection dir = write_p ? SSLR_SENT : SSLR_RECEIVED;

	switch (content_type)
	{
		case SSL3_RT_HEADER:
			if (len >= SSLR_RECORD_HEADER_LEN)
			{
				int64		wire_bytes = write_p ?
					SSLR_RECORD_HEADER_LEN + ((p[3] << 8) | p[4]) : 0;

				if (early)
					sslr_slot_add_early(dir, wire_bytes, 1);
				else
				{
					if (!write_p)
					{
						sslr_catch_up_received();
						sslr_rbio_behind = true;
					}
					else if (unlikely(sslr_rbio_behind))
						sslr_catch_up_received();
					if (unlikely((int64) pg_atomic_read_u64(sslr_my_requests) !=
								 sslr_my_slot->stats.requests_seen))
						sslr_policy_rekey_requested(ssl);
				}
				sslr_count_record(ssl, dir, wire_bytes);
			}
			break;

		case SSL3_RT_HANDSHAKE:
			if (len < 1)
				break;
			if (p[0] == SSL3_MT_KEY_UPDATE)
				sslr_policy_key_rotated(ssl, dir);
			else
				sslr_policy_handshake_message(write_p, p[0]);
			break;

		case SSL3_RT_ALERT:
			if (len >= 2)
			{
				sslr_renegotiation_alert(write_p, p[0], p[1]);
				if (!write_p && p[0] == SSL3_AL_FATAL)
					sslr_policy_peer_ended(p[1]);
			}
			break;

		case SSL3_RT_INNER_CONTENT_TYPE:
			/* TLS 1.3, after the record's body (received: read; sent: made) */
			if (write_p)
			{
				/* what our record carries: data ends a run of updates */
				if (len >= 1 && p[0] == SSL3_RT_APPLICATION_DATA &&
					unlikely(sslr_sent_updates_in_row != 0))
					sslr_policy_data_sent();
			}
			else if (!early && sslr_rbio_behind)
				sslr_catch_up_received();
			break;

		default:
			break;
	}
}

/*
 * The read BIO's callback before authentication: bytes OpenSSL read from
 * the socket.  It passes every call on to a callback that was there
 * before, and never changes the result.
 */
static long
sslr_bio_callback_early(BIO *bio, int oper, const char *argp, size_t len, int argi,
						long argl, int ret, size_t *processed)
{
	if (oper == (BIO_CB_READ | BIO_CB_RETURN) && ret > 0 && processed != NULL)
		sslr_count_received_bytes((int64) *processed, true);
	if (sslr_prev_bio_callback != NULL)
		return sslr_prev_bio_callback(bio, oper, argp, len, argi, argl, ret, processed);
	return ret;
}

/*
 * At the connection's first record: count from its read BIO on, with what
 * it has read already (the first record's header).
 */
static void
sslr_watch_rbio(SSL *ssl)
{
	BIO		   *rbio = SSL_get_rbio(ssl);

	if (rbio == NULL)
		return;
	sslr_rbio = rbio;
	sslr_prev_bio_callback = BIO_get_callback_ex(rbio);
	BIO_set_callback_ex(rbio, sslr_bio_callback_early);
	sslr_count_received_bytes((int64) BIO_number_read(rbio), true);
}

/* Before authentication: see the file header. */
static void
sslr_msg_callback_early(int write_p, int version pg_attribute_unused(),
						int content_type, const void *buf, size_t len,
						SSL *ssl, void *arg pg_attribute_unused())
{
	if (unlikely(MyProcPort == NULL || ssl != MyProcPort->ssl))
	{
		/* not the connection this backend serves */
		SSL_set_msg_callback(ssl, NULL);
		return;
	}
	if (unlikely(sslr_rbio == NULL))
		sslr_watch_rbio(ssl);
	sslr_handle_message(write_p, content_type, buf, len, ssl, true);
}

static void
sslr_msg_callback(int write_p, int version pg_attribute_unused(),
				  int content_type, const void *buf, size_t len,
				  SSL *ssl, void *arg pg_attribute_unused())
{
	sslr_handle_message(write_p, content_type, buf, len, ssl, false);
}

/*
 * OpenSSL created an SSL object (or, from OpenSSL 3.2 on, an SSL_CTX whose
 * SSL objects inherit the callback: compat.h) in this process: count it
 * from the start.
 */
static void
sslr_ssl_new(void *parent, void *ptr pg_attribute_unused(),
			 CRYPTO_EX_DATA *ad pg_attribute_unused(), int idx pg_attribute_unused(),
			 long argl pg_attribute_unused(), void *argp pg_attribute_unused())
{
	if (parent != NULL)
		sslr_set_callback_of_new(parent, sslr_msg_callback_early);
}

/*
 * At start-up, in the postmaster: put the callback on every connection to
 * come, and what it needs outside OpenSSL in place first (it may end a
 * connection before authentication, and can register nothing itself).
 */
void
sslr_accounting_init(void)
{
	sslr_ending_init();
	if (sslr_get_connection_ex_new_index(sslr_ssl_new) < 0)
		ereport(ERROR,
				(errmsg("ssl_renegotiate: could not register with OpenSSL")));
}

/* At exit, before the slot is folded into the totals: the last reads. */
static void
sslr_accounting_exit(int code pg_attribute_unused(), Datum arg pg_attribute_unused())
{
	if (sslr_rbio != NULL)
		sslr_catch_up_received();
}

/*
 * The connection has its shared slot: count there only, and take the read
 * BIO's count instead of its callback (see the file header).  The exit
 * callback is registered after totals.c's, so it runs before it.
 */
void
sslr_accounting_attach(SSL *ssl)
{
	SSL_set_msg_callback(ssl, sslr_msg_callback);
	if (sslr_rbio == NULL || sslr_rbio != SSL_get_rbio(ssl))
		return;
	BIO_set_callback_ex(sslr_rbio, sslr_prev_bio_callback);
	sslr_catch_up_received();
	before_shmem_exit(sslr_accounting_exit, (Datum) 0);
}

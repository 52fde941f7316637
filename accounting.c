/*-------------------------------------------------------------------------
 *
 * accounting.c
 *	  Count every TLS record of this connection, in both directions.
 *
 * OpenSSL's message callback sees each record header (5 bytes: type,
 * version, length) as it is written or read, from the first byte of the
 * handshake, and each handshake message and alert.  A header means
 * 5 + length bytes on the wire, which is what the kernel counts for the
 * socket.
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
 * Two callbacks: the early one adds each record to the connection's
 * buffer in shared memory too (preauth.c, through slots.c), because a
 * backend may leave before authentication by _exit(), with no chance to
 * report; only privileged readers see that buffer live.  Once the
 * connection is authenticated and has its shared slot, it switches to the
 * plain one.
 *
 * Invariants of this file:
 *	- The per-record path does no locking, no allocation, no logging and no
 *	  OpenSSL call: four additions under the slot's change count, a
 *	  comparison with the thresholds (thresholds.h), and one with the
 *	  count of operator requests (before authentication, instead, a few
 *	  atomic additions, and at the first record a compare-and-swap and
 *	  perhaps a kill(pid, 0) to claim the buffer).
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

#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include "accounting.h"
#include "compat.h"
#include "ending.h"
#include "policy.h"
#include "renegotiation.h"
#include "slots.h"
#include "thresholds.h"

#define SSLR_RECORD_HEADER_LEN 5

static inline void
sslr_count_record(SSL *ssl, SslrDirection dir, int64 wire_bytes)
{
	SslrSlot   *slot = sslr_my_slot;
	SslrConnStats *stats = &slot->stats;

	SSLR_BEGIN_WRITE(slot);
	stats->tally.bytes[dir] += wire_bytes;
	stats->tally.records[dir]++;
	stats->bytes_under_key[dir] += wire_bytes;
	stats->records_under_key[dir]++;
	SSLR_END_WRITE(slot);

	/*
	 * Only the inbound path acts here.  The send side is checked at the safe
	 * points of sendpoint.c, never inside an SSL_write, on bytes alone: its
	 * record limit is passed on by zeroing the byte threshold.
	 */
	if (dir == SSLR_RECEIVED)
	{
		if (unlikely(stats->bytes_under_key[dir] >= sslr_attention_bytes[dir] ||
					 stats->records_under_key[dir] >= sslr_attention_records[dir]))
			sslr_receive_attention(ssl);
	}
	else if (unlikely(stats->records_under_key[dir] >= sslr_attention_records[dir]))
		sslr_attention_bytes[dir] = 0;
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
				int64		wire_bytes = SSLR_RECORD_HEADER_LEN + ((p[3] << 8) | p[4]);

				if (early)
					sslr_count_early_record(dir, wire_bytes);
				else if (unlikely((int64) pg_atomic_read_u64(sslr_my_requests) !=
								  sslr_my_slot->stats.requests_seen))
					sslr_rekey_requested(ssl);
				sslr_count_record(ssl, dir, wire_bytes);
			}
			break;

		case SSL3_RT_HANDSHAKE:
			if (len < 1)
				break;
			if (p[0] == SSL3_MT_KEY_UPDATE)
				sslr_key_rotated(ssl, dir);
			else
				sslr_handshake_message(write_p, p[0]);
			break;

		case SSL3_RT_ALERT:
			if (len >= 2)
				sslr_renegotiation_alert(write_p, p[0], p[1]);
			break;

		default:
			break;
	}
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

/* The connection has its shared slot: count there only. */
void
sslr_accounting_attached(SSL *ssl)
{
	SSL_set_msg_callback(ssl, sslr_msg_callback);
}

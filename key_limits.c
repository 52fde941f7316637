/*-------------------------------------------------------------------------
 *
 * key_limits.c
 *	  The limits that depend on more than a setting: the record limit of
 *	  the cipher in force, and what a TLS 1.2 connection does at a limit.
 *
 * The limits in force are published in the backend's slot for its row of
 * the activity view; an assign hook runs before its variable takes the
 * new value, so a change is only marked there, and published at the next
 * safe point.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "replication/walsender.h"

#include <openssl/objects.h>
#include <openssl/ssl.h>

#include "key_limits.h"
#include "settings.h"
#include "slots.h"

/* A setting changed since the limits in force were last published. */
static bool sslr_limits_stale = false;

/*
 * Confidentiality limits in records per key, with a margin: RFC 8446 5.5
 * gives 2^24.5 full-size records for AES-GCM; RFC 9147 4.5.3 gives 2^23.5
 * for AES-CCM.  ChaCha20-Poly1305 has no practical limit.  Ciphers we do not
 * know get the smallest limit.
 */
#define SSLR_GCM_RECORD_LIMIT	(INT64CONST(1) << 24)
#define SSLR_CCM_RECORD_LIMIT	(INT64CONST(1) << 23)

int64
sslr_cipher_limit_for(const SSL *ssl)
{
	const SSL_CIPHER *cipher = SSL_get_current_cipher(ssl);
	int			nid;

	if (cipher == NULL)
		return SSLR_CCM_RECORD_LIMIT;
	nid = SSL_CIPHER_get_cipher_nid(cipher);
	if (nid == NID_aes_128_gcm || nid == NID_aes_256_gcm)
		return SSLR_GCM_RECORD_LIMIT;
	if (nid == NID_chacha20_poly1305)
		return SSLR_NO_LIMIT;
	return SSLR_CCM_RECORD_LIMIT;
}

/*
 * What a TLS 1.2 limit does on this connection.  A walsender is never
 * renegotiated: it writes without blocking and reads its standby's replies
 * while a write may still be pending, and OpenSSL cannot run a handshake
 * across a pending write (the handshake's first write fails with "bad write
 * retry", and the connection with it).  It carries on as under "warn".
 */
SslrTls12Policy
sslr_tls12_action(void)
{
	if (sslr_tls12_policy == SSLR_TLS12_RENEGOTIATE && am_walsender)
		return SSLR_TLS12_WARN;
	return (SslrTls12Policy) sslr_tls12_policy;
}

/* A setting changed (an assign hook): flag only, it must not fail. */
void
sslr_limits_changed(void)
{
	sslr_limits_stale = true;
}

/*
 * Publish the limits in force if a setting changed since the last time.
 * Plain reads and a plain write: safe inside OpenSSL's callbacks.
 */
void
sslr_limits_publish_changed(void)
{
	SslrLimitsInForce limits;

	if (!sslr_limits_stale)
		return;
	sslr_limits_stale = false;
	limits.known = true;
	limits.byte_limit = sslr_byte_limit_bytes();
	limits.hard_limit = sslr_hard_limit_bytes();
	limits.interval_ms = sslr_interval_ms();
	limits.tls12 = sslr_tls12_action();
	sslr_publish_limits(&limits);
}

/*-------------------------------------------------------------------------
 *
 * key_limits.c
 *	  The limits in force: the settings after the safe rule, the record
 *	  limit of the cipher in force, and what a TLS 1.2 connection does at
 *	  a limit.
 *
 * The safe rule: a hard_limit that is on is enforced as at least
 * byte_limit + SSLR_HARD_LIMIT_MARGIN_KB, so that no combination of levels
 * (a file, SET, SET LOCAL, RESET, a function's SET clause, ALTER ROLE,
 * ALTER DATABASE) ends a connection before a rotation was tried.  It is the
 * one rule for the pair: no check hook refuses a pair, as none sees the
 * pair that will meet in a session.  When the rule raises the hard limit,
 * the backend says so in its log at its next safe point (never inside an
 * assign hook or OpenSSL), once for each pair of values.
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

#include "miscadmin.h"
#include "replication/walsender.h"
#include "utils/guc.h"

#include <openssl/objects.h>
#include <openssl/ssl.h>

#include "rotation/key_limits.h"
#include "settings/settings.h"
#include "stats/slots.h"
#include "thresholds.h"

/* the safe rule's log line: wanted, and the pair it was last said for */
static bool sslr_limits_report_pending = false;
static int64 sslr_limits_reported_hard = -1;
static int64 sslr_limits_reported_bytes = -1;

static int64
sslr_kb_to_bytes(int kb)
{
	return (int64) kb * 1024;
}

int64
sslr_key_limits_byte_limit(void)
{
	return sslr_kb_to_bytes(sslr_byte_limit_kb);
}

int64
sslr_key_limits_hard_limit(void)
{
	int64		hard = sslr_kb_to_bytes(sslr_hard_limit_kb);
	int64		floor = sslr_key_limits_byte_limit() + SSLR_HARD_LIMIT_MARGIN_BYTES;

	if (hard <= 0)
		return 0;
	return Max(hard, floor);
}

int64
sslr_key_limits_interval_ms(void)
{
	return (int64) sslr_interval_s * 1000;
}

/* The least time between two rotations of one direction, in force. */
int64
sslr_key_limits_min_gap_ms(void)
{
	if (sslr_debug_rekey_gap_ms >= 0)
		return sslr_debug_rekey_gap_ms;
	return sslr_rekey_gap_ms;
}

char *
sslr_key_limits_format_bytes(int64 bytes)
{
	static const char *const units[] = {"TB", "GB", "MB", "kB"};
	const int	nunits = lengthof(units);

	if (bytes == 0)
		return pstrdup("0");
	for (int i = 0; i < nunits; i++)
	{
		int64		unit = INT64CONST(1) << (10 * (nunits - i));

		if (bytes != 0 && bytes % unit == 0)
			return psprintf(INT64_FORMAT "%s", bytes / unit, units[i]);
	}
	return psprintf(INT64_FORMAT "B", bytes);
}

/* A time as PostgreSQL shows a setting in ms: the largest unit that fits. */
char *
sslr_key_limits_format_ms(int64 ms)
{
	static const char *const units[] = {"d", "h", "min", "s"};
	static const int64 sizes[] = {86400000, 3600000, 60000, 1000};

	if (ms == 0)
		return pstrdup("0");
	for (int i = 0; i < (int) lengthof(units); i++)
	{
		if (ms % sizes[i] == 0)
			return psprintf(INT64_FORMAT "%s", ms / sizes[i], units[i]);
	}
	return psprintf(INT64_FORMAT "ms", ms);
}

/* The level a value came from, as a DBA would set it there. */
const char *
sslr_key_limits_source_name(GucSource source)
{
	switch (source)
	{
		case PGC_S_DEFAULT:
		case PGC_S_DYNAMIC_DEFAULT:
			return "the default";
		case PGC_S_FILE:
			return "the configuration file";
		case PGC_S_ARGV:
		case PGC_S_ENV_VAR:
			return "the server's command line";
		case PGC_S_GLOBAL:
			return "ALTER ROLE ALL SET";
		case PGC_S_DATABASE:
			return "ALTER DATABASE SET";
		case PGC_S_USER:
			return "ALTER ROLE SET";
		case PGC_S_DATABASE_USER:
			return "ALTER ROLE IN DATABASE SET";
		case PGC_S_CLIENT:
			return "the client's connection options";
		default:
			return "SET";
	}
}

/*
 * At a safe point: if the safe rule raises the hard limit, say so, with
 * both values and the level each came from; once for each pair.
 */
void
sslr_key_limits_safe_point(void)
{
	int64		hard = sslr_key_limits_hard_limit();
	int64		set_hard = sslr_kb_to_bytes(sslr_hard_limit_kb);
	int64		bytes = sslr_key_limits_byte_limit();

	if (!sslr_limits_report_pending)
		return;
	sslr_limits_report_pending = false;
	if (hard == set_hard ||
		(hard == sslr_limits_reported_hard && bytes == sslr_limits_reported_bytes))
		return;
	sslr_limits_reported_hard = hard;
	sslr_limits_reported_bytes = bytes;
	ereport(LOG_SERVER_ONLY,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("ssl_renegotiate: pid %d enforces ssl_renegotiate.hard_limit as %s, not %s",
					MyProcPid, sslr_key_limits_format_bytes(hard), sslr_key_limits_format_bytes(set_hard)),
			 errdetail("ssl_renegotiate.hard_limit is %s (from %s), ssl_renegotiate.byte_limit is %s (from %s); a hard limit must stay %s above the byte limit, for the client's lag in answering a key update.",
					   sslr_key_limits_format_bytes(set_hard),
					   sslr_key_limits_source_name(sslr_hard_limit_source),
					   sslr_key_limits_format_bytes(bytes),
					   sslr_key_limits_source_name(sslr_byte_limit_source),
					   sslr_key_limits_format_bytes(SSLR_HARD_LIMIT_MARGIN_BYTES)),
			 errhint("Set ssl_renegotiate.hard_limit to 0, or to at least %s, at the level where it is set.",
					 sslr_key_limits_format_bytes(hard)),
			 errhidestmt(true), errhidecontext(true)));
}

/* This connection's measured lag (key_limits.h). */
static int64 sslr_measured_peer_lag = 0;

void
sslr_key_limits_note_peer_lag(int64 bytes)
{
	sslr_measured_peer_lag = bytes;
}

int64
sslr_key_limits_peer_lag(void)
{
	return sslr_measured_peer_lag;
}

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
sslr_key_limits_cipher_limit(const SSL *ssl)
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
sslr_key_limits_tls12_action(void)
{
	if (sslr_tls12_policy == SSLR_TLS12_RENEGOTIATE && am_walsender)
		return SSLR_TLS12_WARN;
	return (SslrTls12Policy) sslr_tls12_policy;
}

/*
 * A setting changed (an assign hook), or enforcement starts: flags only, it
 * must not fail.  The next safe point publishes the limits in force and
 * says whether the safe rule raises the hard limit.
 */
void
sslr_key_limits_changed(void)
{
	sslr_limits_stale = true;
	sslr_limits_report_pending = true;
	sslr_want_safe_point();
}

/*
 * Publish the limits in force if a setting changed since the last time.
 * Plain reads and a plain write: safe inside OpenSSL's callbacks.
 */
void
sslr_key_limits_publish_changed(void)
{
	SslrLimitsInForce limits;

	if (!sslr_limits_stale)
		return;
	sslr_limits_stale = false;
	limits.known = true;
	limits.byte_limit = sslr_key_limits_byte_limit();
	limits.hard_limit = sslr_key_limits_hard_limit();
	limits.interval_ms = sslr_key_limits_interval_ms();
	limits.tls12 = sslr_key_limits_tls12_action();
	sslr_slot_publish_limits(&limits);
}

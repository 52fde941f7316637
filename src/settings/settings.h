/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The values of the ssl_renegotiate.* settings, for every module to read.
 *
 * settings.c holds the variables, at their boot values; setting_checks.c
 * defines the settings on them, refuses values that would switch
 * protection off by accident, and tells policy.c when one changes.  What a
 * connection is held to is key_limits.c's: the settings after the old name
 * and the safe rule (docs/settings.md).
 *
 * byte_limit and hard_limit are integer settings in kB, interval in seconds
 * (bare numbers mean what they always meant), so that SHOW, pg_settings and
 * PostgreSQL's range errors speak in the units people type.  PostgreSQL
 * rounds such a value to its unit before a check sees it ('100B' arrives
 * as 0, "off"): setting_checks.c refuses those from the text typed.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SETTINGS_H
#define SSLR_SETTINGS_H

#include "utils/guc.h"

#include "sslr_types.h"

/* boot values, shared by the variables and their definitions */
#define SSLR_BYTE_LIMIT_KB_DEFAULT	(512 * 1024)
#define SSLR_INTERVAL_S_DEFAULT		0
#define SSLR_HARD_LIMIT_KB_DEFAULT	0
#define SSLR_OLD_LIMIT_UNSET		(-1)	/* ssl_renegotiate.limit not given */
#define SSLR_TLS12_DEFAULT			SSLR_TLS12_WARN
#define SSLR_LOG_REKEYS_DEFAULT		false
#define SSLR_MAX_PEER_KEY_UPDATES_DEFAULT 32

/*
 * The least time between two rotations of one direction's key that the
 * extension starts (docs/settings.md says why 1s, and why not below
 * 250ms); debug_min_rekey_gap, for tests only, overrides it (-1: does not).
 */
#define SSLR_MIN_REKEY_GAP_MS_DEFAULT	1000
#define SSLR_MIN_REKEY_GAP_MS_FLOOR		250
#define SSLR_MIN_REKEY_GAP_MS_MAX		3600000 /* an hour */
#define SSLR_DEBUG_MIN_REKEY_GAP_UNSET	(-1)

/*
 * KeyUpdates the server sends in a row, with no application data of its
 * own between them, before it stops starting more (policy.c): GnuTLS ends
 * a connection at the 9th within a second, rustls and BoringSSL at the 33rd
 * in a row, Go's crypto/tls after 16 records in a row that carry no data.
 * Only the cipher's record limit goes past it (RFC 8446 5.5 then requires
 * the new key).
 */
#define SSLR_MAX_KEY_UPDATES_IN_ROW	8

/*
 * The smallest values other than 0 (off), and the largest.  byte_limit and
 * interval: one of their unit; a value typed below it is refused, not
 * rounded to "off".  hard_limit: the margin it must leave above byte_limit
 * (key_limits.h), so that no handshake and no rotation can be cut short by
 * it.  The largest interval keeps its timer (in ms) within an int.
 */
#define SSLR_BYTE_LIMIT_KB_MIN		1
#define SSLR_INTERVAL_S_MIN			1
#define SSLR_HARD_LIMIT_KB_MIN		SSLR_HARD_LIMIT_MARGIN_KB
#define SSLR_LIMIT_KB_MAX			(1024 * 1024 * 1024)	/* 1TB */
#define SSLR_INTERVAL_S_MAX			2000000 /* about 23 days */

/*
 * How far hard_limit must stay above byte_limit: 64 MiB, four times the
 * largest lag of a client answering our key update request that was
 * measured (libpq, 14.3 MB; docs/clients.md).
 */
#define SSLR_HARD_LIMIT_MARGIN_KB	(64 * 1024)

/*
 * What ssl_renegotiate.max_peer_key_updates gives back for the bytes a
 * peer sends: one unasked key update per full record (keyupdate.c).
 */
#define SSLR_PEER_UPDATE_BYTES	16384

extern int	sslr_byte_limit_kb;
extern int	sslr_interval_s;
extern int	sslr_hard_limit_kb;
extern int	sslr_old_limit_kb;	/* the 1.0 name of byte_limit */
extern int	sslr_tls12_policy;	/* an SslrTls12Policy */
extern bool sslr_log_rekeys;
extern int	sslr_max_peer_key_updates;
extern int	sslr_rekey_gap_ms;
extern int	sslr_debug_rekey_gap_ms;

/* where the current byte_limit and hard_limit came from */
extern GucSource sslr_byte_limit_source;
extern GucSource sslr_hard_limit_source;

#endif							/* SSLR_SETTINGS_H */

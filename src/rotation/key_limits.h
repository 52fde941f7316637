/*-------------------------------------------------------------------------
 *
 * key_limits.h
 *	  The numbers a connection's keys are held to: the byte limit, the hard
 *	  limit and the interval in force, the cipher's record limit, and what
 *	  TLS 1.2 does at them.
 *
 * "In force" is what this backend enforces, after the safe rule: a hard_limit that is on is at least byte_limit +
 * SSLR_HARD_LIMIT_MARGIN_KB, whatever level each came from.  All in base
 * units, 0 = off.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_KEY_LIMITS_H
#define SSLR_KEY_LIMITS_H

#include <openssl/ssl.h>

#include "settings/settings.h"
#include "sslr_types.h"

#define SSLR_HARD_LIMIT_MARGIN_BYTES	((int64) SSLR_HARD_LIMIT_MARGIN_KB * 1024)

extern int64 sslr_key_limits_byte_limit(void);
extern int64 sslr_key_limits_hard_limit(void);
extern int64 sslr_key_limits_interval_ms(void);
extern int64 sslr_key_limits_min_gap_ms(void);

/*
 * Bytes a TLS 1.3 peer sent between our last key update request and its
 * answer (keyupdate.c learns it): policy.c asks that much before the byte
 * limit, and the hard limit's margin is for it.
 */
extern void sslr_key_limits_note_peer_lag(int64 bytes);
extern int64 sslr_key_limits_peer_lag(void);

extern int64 sslr_key_limits_cipher_limit(const SSL *ssl);
extern SslrTls12Policy sslr_key_limits_tls12_action(void);

/* the limits in force, published in this backend's slot (policy.c) */
extern void sslr_key_limits_changed(void);
extern void sslr_key_limits_publish_changed(void);

/* for messages, outside OpenSSL: "64MB", "1536B"; "30min", "400ms"; palloc'd */
extern char *sslr_key_limits_format_bytes(int64 bytes);
extern char *sslr_key_limits_format_ms(int64 ms);
extern const char *sslr_key_limits_source_name(GucSource source);

/* at a safe point: say if the safe rule applies */
extern void sslr_key_limits_safe_point(void);

#endif							/* SSLR_KEY_LIMITS_H */

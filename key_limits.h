/*-------------------------------------------------------------------------
 *
 * key_limits.h
 *	  The numbers a connection's keys are held to: the byte limit, the hard
 *	  limit, the cipher's record limit, and what TLS 1.2 does at them.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_KEY_LIMITS_H
#define SSLR_KEY_LIMITS_H

#include <openssl/ssl.h>

#include "settings.h"
#include "sslr_types.h"

/* ssl_renegotiate.byte_limit, in bytes; 0 is off. */
static inline int64
sslr_byte_limit_bytes(void)
{
	return (int64) sslr_byte_limit_kb * 1024;
}

/* ssl_renegotiate.hard_limit, in bytes; 0 is off. */
static inline int64
sslr_hard_limit_bytes(void)
{
	return (int64) sslr_hard_limit_kb * 1024;
}

/* ssl_renegotiate.interval, in milliseconds; 0 is off. */
static inline int64
sslr_interval_ms(void)
{
	return (int64) sslr_interval_s * 1000;
}

extern int64 sslr_cipher_limit_for(const SSL *ssl);
extern SslrTls12Policy sslr_tls12_action(void);

/* the limits in force, published in this backend's slot (policy.c) */
extern void sslr_limits_changed(void);
extern void sslr_limits_publish_changed(void);

#endif							/* SSLR_KEY_LIMITS_H */

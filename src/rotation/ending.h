/*-------------------------------------------------------------------------
 *
 * ending.h
 *	  Ending a connection at a limit.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_ENDING_H
#define SSLR_ENDING_H

#include <openssl/ssl.h>

#include "sslr_types.h"

/* Why a limit ends a connection. */
typedef enum SslrEndReason
{
	SSLR_END_NONE,
	SSLR_END_HARD_LIMIT,		/* ssl_renegotiate.hard_limit */
	SSLR_END_TLS12,				/* ssl_renegotiate.tls12 = terminate */
	SSLR_END_TLS12_REQUEST,		/* ... and an operator asked for new keys */
	SSLR_END_KEY_UPDATE_FLOOD	/* ssl_renegotiate.max_peer_key_updates */
} SslrEndReason;

extern void sslr_ending_init(void);
extern void sslr_ending_setup(void);
extern void sslr_ending_defer(SSL *ssl, SslrEndReason reason, int64 amount);
extern void sslr_ending_terminate(SslrDirection dir, SslrEndReason reason);
extern bool sslr_ending_hides(const ErrorData *edata);
extern void sslr_ending_at_exit(bool may_send);

#endif							/* SSLR_ENDING_H */

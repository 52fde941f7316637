/*-------------------------------------------------------------------------
 *
 * keyupdate.h
 *	  TLS 1.3 key rotation: our KeyUpdate, the request to the peer, the
 *	  budget of the peer's unasked ones.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_KEYUPDATE_H
#define SSLR_KEYUPDATE_H

#include "datatype/timestamp.h"

#include <openssl/ssl.h>

/* what an attempt came to */
typedef enum SslrAttempt
{
	SSLR_ATTEMPT_DONE,
	SSLR_ATTEMPT_RETRY,			/* not now: try at the next safe point */
	SSLR_ATTEMPT_FAILED
} SslrAttempt;

extern SslrAttempt sslr_keyupdate_send(SSL *ssl);
extern SslrAttempt sslr_keyupdate_request(SSL *ssl);
extern int64 sslr_keyupdate_answered(TimestampTz now);
extern bool sslr_keyupdate_unasked_allowed(TimestampTz now);
extern int64 sslr_keyupdate_unasked(void);
extern void sslr_keyupdate_sent(TimestampTz now);
extern void sslr_keyupdate_data_sent(void);
extern void sslr_keyupdate_peer_ended(int fatal_alert);
extern void sslr_keyupdate_at_exit(void);

#endif							/* SSLR_KEYUPDATE_H */

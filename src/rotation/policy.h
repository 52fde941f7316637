/*-------------------------------------------------------------------------
 *
 * policy.h
 *	  When a connection's keys rotate, and which mechanism does it.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_POLICY_H
#define SSLR_POLICY_H

#include "libpq/libpq-be.h"

#include <openssl/ssl.h>

#include "sslr_types.h"

/* start of enforcement, and settings (ssl_renegotiate.c) */
extern void sslr_policy_attach(Port *port);
extern void sslr_policy_changed(void);

/* the safe points (sendpoint.c and the record callback, accounting.c) */
extern void sslr_policy_send_point(bool may_block);
extern void sslr_policy_receive_attention(SSL *ssl);

/* what the record callback saw (accounting.c) */
extern void sslr_policy_key_rotated(SSL *ssl, SslrDirection dir);
extern void sslr_policy_handshake_message(int write_p, int msg_type);
extern void sslr_policy_rekey_requested(SSL *ssl);
extern void sslr_policy_data_sent(void);
extern void sslr_policy_peer_ended(int fatal_alert);

#endif							/* SSLR_POLICY_H */

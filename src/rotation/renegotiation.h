/*-------------------------------------------------------------------------
 *
 * renegotiation.h
 *	  TLS 1.2 key rotation: a server-initiated renegotiation.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_RENEGOTIATION_H
#define SSLR_RENEGOTIATION_H

#include "datatype/timestamp.h"
#include "libpq/libpq-be.h"

#include <openssl/ssl.h>

extern void sslr_renegotiation_setup(Port *port);
extern bool sslr_renegotiation_start(SSL *ssl);
extern bool sslr_renegotiation_now(bool may_block);
extern bool sslr_renegotiation_in_flight(void);
extern bool sslr_renegotiation_waiting(void);
extern int64 sslr_renegotiation_started_ago(TimestampTz now);
extern bool sslr_renegotiation_finished(int write_p, int msg_type);
extern void sslr_renegotiation_note_cipher(void);
extern void sslr_renegotiation_alert(int write_p, int level, int description);
extern void sslr_renegotiation_safe_point(int64 record_limit);
extern void sslr_renegotiation_at_exit(int64 record_limit);
extern void sslr_renegotiation_drive(void);
extern void sslr_renegotiation_lost_at_exit(void);

#endif							/* SSLR_RENEGOTIATION_H */

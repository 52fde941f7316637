/*-------------------------------------------------------------------------
 *
 * handshake.h
 *	  A renegotiation in flight: its state, shared with renegotiation.c,
 *	  and the bounded wait for the client's half of the handshake.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_HANDSHAKE_H
#define SSLR_HANDSHAKE_H

#include "libpq/libpq-be.h"
#include "utils/timestamp.h"

#include <openssl/ssl.h>

#include "stats/slots.h"

/* How long the send side waits for a client to take part in renegotiation. */
#define SSLR_RENEGOTIATION_WAIT_MS 10000

/* This connection's renegotiations (TLS 1.2), written by this backend only. */
typedef struct SslrRenegotiationState
{
	Port	   *port;			/* the connection, once set up (TLS 1.2) */
	SSL		   *ssl;
	uint64		window_options; /* options lifted while ours runs */
	bool		in_flight;
	int			finished_seen;	/* bit 1: ours, bit 2: the client's */
	bool		wait_over;		/* this attempt waited all it may */
	bool		deferred;		/* ... and was put off for waiting data */
	bool		dying;			/* a termination is pending: wait no more */
	TimestampTz started;		/* when we asked for it */
	TimestampTz deadline;
	bool		verify_peer_pending;
	bool		peer_refused;
	bool		unanswered_pending; /* to be logged */
	bool		cipher_change_pending;	/* to be logged */
	char		previous_cipher[SSLR_CIPHER_LEN];
} SslrRenegotiationState;


extern SslrRenegotiationState sslr_renegotiation;

extern void sslr_renegotiation_drive(void);
extern void sslr_renegotiation_lost_at_exit(void);

#endif							/* SSLR_HANDSHAKE_H */

/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The values of the ssl_renegotiate.* settings, for every room to read.
 *
 * settings.c holds the variables, at their boot values; _PG_init
 * (ssl_renegotiate.c) defines the settings on them and tells policy.c when
 * one changes.  README, "Settings", says what each one means.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SETTINGS_H
#define SSLR_SETTINGS_H

#include "sslr_types.h"

/* boot values, shared by the variables and their definitions */
#define SSLR_BYTE_LIMIT_KB_DEFAULT	(512 * 1024)
#define SSLR_INTERVAL_S_DEFAULT		0
#define SSLR_HARD_LIMIT_KB_DEFAULT	0
#define SSLR_TLS12_DEFAULT			SSLR_TLS12_WARN
#define SSLR_LOG_REKEYS_DEFAULT		false
#define SSLR_MAX_PEER_KEY_UPDATES_DEFAULT 32

/*
 * What ssl_renegotiate.max_peer_key_updates gives back for the bytes a
 * peer sends: one unasked key update per full record (keyupdate.c).
 */
#define SSLR_PEER_UPDATE_BYTES	16384

extern int	sslr_byte_limit_kb;
extern int	sslr_interval_s;
extern int	sslr_hard_limit_kb;
extern int	sslr_tls12_policy;	/* an SslrTls12Policy */
extern bool sslr_log_rekeys;
extern int	sslr_max_peer_key_updates;

#endif							/* SSLR_SETTINGS_H */

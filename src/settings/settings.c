/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The variables behind the ssl_renegotiate.* settings.
 *
 * They sit here, below every module that reads them, so that reading a
 * setting depends on nothing above; setting_checks.c defines the settings
 * on them.  Each starts at its boot value (settings.h), so that a backend
 * that never loaded the settings reads the defaults.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "settings/settings.h"

int			sslr_byte_limit_kb = SSLR_BYTE_LIMIT_KB_DEFAULT;
int			sslr_interval_s = SSLR_INTERVAL_S_DEFAULT;
int			sslr_hard_limit_kb = SSLR_HARD_LIMIT_KB_DEFAULT;
int			sslr_old_limit_kb = SSLR_OLD_LIMIT_UNSET;
int			sslr_tls12_policy = SSLR_TLS12_DEFAULT;
bool		sslr_log_rekeys = SSLR_LOG_REKEYS_DEFAULT;
int			sslr_max_peer_key_updates = SSLR_MAX_PEER_KEY_UPDATES_DEFAULT;
int			sslr_rekey_gap_ms = SSLR_MIN_REKEY_GAP_MS_DEFAULT;
int			sslr_debug_rekey_gap_ms = SSLR_DEBUG_MIN_REKEY_GAP_UNSET;

GucSource	sslr_byte_limit_source = PGC_S_DEFAULT;
GucSource	sslr_hard_limit_source = PGC_S_DEFAULT;

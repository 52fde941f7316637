/*-------------------------------------------------------------------------
 *
 * rekey_log.h
 *	  What the server log says of rotations, and what each of ours cost.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_REKEY_LOG_H
#define SSLR_REKEY_LOG_H

#include "sslr_types.h"

extern void sslr_rekey_log_skipped(void);
extern void sslr_rekey_log_request(void);
extern void sslr_rekey_log_queue(SslrDirection dir, bool peer_initiated,
								 int64 bytes, int64 duration_us);
extern void sslr_rekey_log_cost_begin(void);
extern void sslr_rekey_log_cost_end(void);
extern void sslr_rekey_log_safe_point(void);
extern void sslr_rekey_log_at_exit(void);

#endif							/* SSLR_REKEY_LOG_H */

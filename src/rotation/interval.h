/*-------------------------------------------------------------------------
 *
 * interval.h
 *	  ssl_renegotiate.interval: how old each direction's key is, and the
 *	  timer that says when one outlives the interval.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_INTERVAL_H
#define SSLR_INTERVAL_H

#include "datatype/timestamp.h"

#include "sslr_types.h"

extern void sslr_interval_start(TimestampTz now);
extern void sslr_interval_key_changed(SslrDirection dir, TimestampTz now);
extern bool sslr_interval_due(void);
extern void sslr_interval_check(void);
extern bool sslr_interval_rearm_pending(void);
extern void sslr_interval_arm(void);
extern bool sslr_interval_expired(SslrDirection dir);
extern void sslr_interval_recheck(void);
extern void sslr_interval_comm_reset(void);
extern int64 sslr_interval_gap_wait_us(SslrDirection dir, TimestampTz now);
extern int64 sslr_interval_key_age_us(SslrDirection dir, TimestampTz now);
extern void sslr_interval_wake_at(TimestampTz when);

#endif							/* SSLR_INTERVAL_H */

/*-------------------------------------------------------------------------
 *
 * thresholds.h
 *	  What the hot paths compare with, and how any module asks for a safe
 *	  point.
 *
 * The record callback (accounting.c) and the send points (sendpoint.c)
 * compare the bytes and records under the current key with these numbers,
 * and do nothing else unless a comparison fires.  policy.c alone computes
 * them; any other module only zeroes one to be looked at sooner, through
 * the inline helpers below (sslr_want_safe_point, ...).  SSLR_NO_LIMIT
 * means never.  The send side compares bytes only: its record limit is
 * checked by the record callback, which then zeroes the byte threshold.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_THRESHOLDS_H
#define SSLR_THRESHOLDS_H

#include "sslr_types.h"

extern SSLR_HOT_DATA volatile int64 sslr_attention_bytes[SSLR_NDIRECTIONS];
extern SSLR_HOT_DATA volatile int64 sslr_attention_records[SSLR_NDIRECTIONS];

/*
 * Our KeyUpdates since the last record of application data we sent
 * (keyupdate.c counts them); the record callback compares it with 0 at
 * each record of ours that carries data.
 */
extern SSLR_HOT_DATA int sslr_sent_updates_in_row;

/* Something to do at the next send point: log lines, checks, a handshake. */
extern bool sslr_safe_point_work;

/* Have the next send point do its slow work. */
static inline void
sslr_want_safe_point(void)
{
	sslr_safe_point_work = true;
	sslr_attention_bytes[SSLR_SENT] = 0;
}

/*
 * Have the next send point look further: the record callback saw our record
 * limit reached, which the send side does not count itself.
 */
static inline void
sslr_want_send_attention(void)
{
	sslr_attention_bytes[SSLR_SENT] = 0;
}

/* Have the next I/O in either direction look further. */
static inline void
sslr_want_attention(void)
{
	sslr_attention_bytes[SSLR_SENT] = sslr_attention_bytes[SSLR_RECEIVED] = 0;
}

#endif							/* SSLR_THRESHOLDS_H */

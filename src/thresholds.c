/*-------------------------------------------------------------------------
 *
 * thresholds.c
 *	  The numbers the hot paths compare with (see thresholds.h).
 *
 * Backend-local, written by this backend only: by policy.c, which
 * recomputes them, by the interval timer's signal handler and by whoever
 * wants a safe point, which only zero them.  A zeroed threshold is safe
 * whenever it is seen: the slow path it leads to looks at everything.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "thresholds.h"

volatile int64 sslr_attention_bytes[SSLR_NDIRECTIONS] = {SSLR_NO_LIMIT, SSLR_NO_LIMIT};
volatile int64 sslr_attention_records[SSLR_NDIRECTIONS] = {SSLR_NO_LIMIT, SSLR_NO_LIMIT};

int			sslr_sent_updates_in_row = 0;

bool		sslr_safe_point_work = false;

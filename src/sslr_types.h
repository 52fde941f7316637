/*-------------------------------------------------------------------------
 *
 * sslr_types.h
 *	  The common types of ssl_renegotiate: the types and constants more
 *	  than one module shares.
 *
 * Nothing here belongs to a module, and nothing here calls one: a module's own
 * types and entry points are in the header named after it.
 * docs/internals.md draws the modules and their includes.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_TYPES_H
#define SSLR_TYPES_H

/*
 * Data the hot paths read on every message: hidden from the dynamic symbol
 * table, so that the code reaches it directly instead of through the GOT.
 */
#if defined(__GNUC__)
#define SSLR_HOT_DATA __attribute__((visibility("hidden")))
#else
#define SSLR_HOT_DATA
#endif

/* Direction of traffic, seen from the server. */
typedef enum SslrDirection
{
	SSLR_SENT = 0,
	SSLR_RECEIVED = 1
} SslrDirection;

#define SSLR_NDIRECTIONS 2

/* "Never", for thresholds and limits. */
#define SSLR_NO_LIMIT			PG_INT64_MAX

/* What a connection on TLS 1.2 does when it reaches a limit. */
typedef enum SslrTls12Policy
{
	SSLR_TLS12_RENEGOTIATE,
	SSLR_TLS12_WARN,
	SSLR_TLS12_TERMINATE
} SslrTls12Policy;

/*
 * Cumulative counts, of one connection (its slot) and of the cluster (the
 * totals).  Every member is an int64 so that they can be added and
 * subtracted field by field, and kept in arrays of atomics; keep it that
 * way.
 */
typedef struct SslrTally
{
	int64		bytes[SSLR_NDIRECTIONS];	/* TLS bytes on the wire */
	int64		records[SSLR_NDIRECTIONS];	/* TLS records */
	int64		rekeys[SSLR_NDIRECTIONS];	/* key rotations, per direction */
	int64		rekey_failures; /* rekeys attempted that did not happen */
	int64		rekeys_skipped; /* limits reached where policy said carry on */
	int64		peer_renegotiations_refused;	/* client-initiated, refused */
	int64		terminations;	/* connections ended by a limit */
	int64		rekey_time_us;	/* time spent in server-initiated rekeys */
} SslrTally;

#define SSLR_TALLY_FIELDS (sizeof(SslrTally) / sizeof(int64))

StaticAssertDecl(sizeof(SslrTally) % sizeof(int64) == 0,
				 "SslrTally must consist of int64 members only");

/* dst += sign * src, field by field */
static inline void
sslr_tally_add(SslrTally *dst, const SslrTally *src, int sign)
{
	int64	   *d = (int64 *) dst;
	const int64 *s = (const int64 *) src;

	for (int i = 0; i < (int) SSLR_TALLY_FIELDS; i++)
		d[i] += sign * s[i];
}

#endif							/* SSLR_TYPES_H */

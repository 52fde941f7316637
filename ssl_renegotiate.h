/*-------------------------------------------------------------------------
 *
 * ssl_renegotiate.h
 *	  Private types and entry points shared by the rooms of ssl_renegotiate.
 *
 * The flow of one byte: OpenSSL's record layer calls accounting.c, which
 * adds the record to this connection's slot (shmem.c) and, when a threshold
 * is crossed, hands over to rekey.c.  rekey.c acts only at safe points
 * (between SSL calls, or on the inbound record path for requests to the
 * peer).  sql_api.c reads the slots and totals for the views.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSL_RENEGOTIATE_H
#define SSL_RENEGOTIATE_H

#include "datatype/timestamp.h"
#include "libpq/libpq-be.h"
#include "storage/lwlock.h"

#include <openssl/ssl.h>

/* Direction of traffic, seen from the server. */
typedef enum SslrDirection
{
	SSLR_SENT = 0,
	SSLR_RECEIVED = 1
} SslrDirection;

#define SSLR_NDIRECTIONS 2

/* What a TLS 1.2 connection does when it reaches a limit. */
typedef enum SslrTls12Policy
{
	SSLR_TLS12_RENEGOTIATE,
	SSLR_TLS12_WARN,
	SSLR_TLS12_TERMINATE
} SslrTls12Policy;

/*
 * Cumulative counts that are summed into the cluster totals.  Every member
 * is an int64 so that the totals code can add and subtract tallies field by
 * field (see sslr_tally_add); keep it that way.
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

/* Per-connection state, in the backend's shared slot. */
typedef struct SslrConnStats
{
	SslrTally	tally;
	int64		bytes_under_key[SSLR_NDIRECTIONS];
	int64		records_under_key[SSLR_NDIRECTIONS];
	int64		max_bytes_per_key[SSLR_NDIRECTIONS];	/* among retired keys */
	TimestampTz last_rekey;
	bool		rekey_pending;	/* a rekey we asked the peer for is unanswered */
} SslrConnStats;

#define SSLR_VERSION_LEN 16
#define SSLR_CIPHER_LEN 64

/*
 * One backend's slot.  Written only by its owner, between increments of
 * changecount (odd while a write is in progress); see shmem.c.
 */
typedef struct SslrSlot
{
	int			changecount;
	int			pid;			/* 0 when the slot is free */
	Oid			userid;
	bool		is_walsender;
	char		version[SSLR_VERSION_LEN];
	char		cipher[SSLR_CIPHER_LEN];
	SslrConnStats stats;
} SslrSlot;

/* Cluster totals, guarded by the extension's LWLock. */
typedef struct SslrTotals
{
	int64		connections;
	SslrTally	tally;
	TimestampTz stats_reset;
} SslrTotals;

/*
 * The slot this backend writes: a backend-local one during the handshake,
 * the shared one once attached, the local one again after detaching.
 */
extern SslrSlot *sslr_my_slot;

/* Writer side of the change-count protocol. */
#define SSLR_BEGIN_WRITE(slot) \
	do { (slot)->changecount++; pg_write_barrier(); } while (0)
#define SSLR_END_WRITE(slot) \
	do { pg_write_barrier(); (slot)->changecount++; } while (0)

/* settings (ssl_renegotiate.c) */
extern int	sslr_limit_kb;
extern int	sslr_interval_s;
extern int	sslr_hard_limit_kb;
extern int	sslr_tls12_policy;
extern bool sslr_log_rekeys;
extern int	sslr_max_peer_key_updates;

/* shmem.c */
extern Size sslr_shmem_size(void);
extern void sslr_shmem_request(void);
extern void sslr_shmem_startup(void);
extern bool sslr_shmem_ready(void);
extern void sslr_count_early_record(SslrDirection dir, int64 wire_bytes);
extern void sslr_count(int64 *counter, int64 amount);
extern void sslr_attach_slot(Port *port);
extern bool sslr_publish_userid(void);
extern void sslr_publish_cipher(SSL *ssl);
extern void sslr_read_slot(int index, SslrSlot *copy);
extern int	sslr_slot_count(void);
extern void sslr_read_totals(SslrTotals *totals, bool (*include) (Oid userid));
extern void sslr_reset_totals(void);
extern void sslr_tally_add(SslrTally *dst, const SslrTally *src, int sign);

/* accounting.c */
extern void sslr_msg_callback_early(int write_p, int version, int content_type,
									const void *buf, size_t len, SSL *ssl, void *arg);
extern void sslr_accounting_attached(SSL *ssl);

/* rekey.c */
extern void sslr_rekey_start(Port *port);
extern void sslr_rekey_policy_changed(void);
extern void sslr_rekey_at_exit(void);
extern void sslr_receive_attention(SSL *ssl);
extern void sslr_key_rotated(SSL *ssl, SslrDirection dir);
extern void sslr_renegotiation_message(int write_p, int msg_type);
extern void sslr_alert(int write_p, int level, int description);

/* thresholds the record path compares against (rekey.c) */
extern volatile int64 sslr_attention_bytes[SSLR_NDIRECTIONS];
extern volatile int64 sslr_attention_records[SSLR_NDIRECTIONS];

#endif							/* SSL_RENEGOTIATE_H */

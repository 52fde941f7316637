/*-------------------------------------------------------------------------
 *
 * role_totals.h
 *	  Totals per database and role: what the sessions of each (database,
 *	  role) have counted, in a bounded table that evicts the least used.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_ROLE_TOTALS_H
#define SSLR_ROLE_TOTALS_H

#include "datatype/timestamp.h"

#include "sslr_types.h"

/* ssl_renegotiate.max_database_role_totals: entries of the table */
extern int	sslr_max_database_role_totals;

#define SSLR_MAX_DATABASE_ROLE_TOTALS_DEFAULT 1000

/* The key: dbid 0 for a walsender without a database. */
typedef struct SslrRoleKey
{
	Oid			dbid;
	Oid			userid;
} SslrRoleKey;

/* One (database, role): its sessions' counts since stats_reset. */
typedef struct SslrRoleEntry
{
	SslrRoleKey key;
	int64		connections;
	SslrTally	tally;
	TimestampTz stats_reset;
} SslrRoleEntry;

/* The table as a whole: entries evicted since stats_reset. */
typedef struct SslrRoleInfo
{
	int64		evicted;
	TimestampTz stats_reset;
} SslrRoleInfo;

extern void sslr_role_totals_shmem_request(void);
extern void sslr_role_totals_shmem_startup(void);

/* at a backend's exit, under the extension's LWLock held exclusively */
extern void sslr_role_totals_fold(int slot_index, const SslrTally *slot_tally);

/* readers and the reset */
extern int	sslr_read_role_totals(SslrRoleEntry **rows,
								  bool (*include) (const SslrRoleKey *key));
extern void sslr_role_totals_read_info(SslrRoleInfo *info);
extern void sslr_role_totals_reset(const Oid *dbid, const Oid *userid);

/* a role or a database dropped; entries of the file to check (role_drops.c) */
extern void sslr_role_totals_purge(const Oid *dbid, const Oid *userid);
extern bool sslr_role_totals_unchecked(void);
extern void sslr_role_totals_checked(void);

/* for the statistics file, in the postmaster */
extern bool sslr_role_totals_to_keep(SslrRoleInfo *info, int64 *nentries);
extern void sslr_role_totals_foreach(void (*fn) (const SslrRoleEntry *entry, void *arg),
									 void *arg);
extern void sslr_role_totals_restore(const SslrRoleInfo *info,
									 SslrRoleEntry *entries, int64 nentries);

#endif							/* SSLR_ROLE_TOTALS_H */

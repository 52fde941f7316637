/*-------------------------------------------------------------------------
 *
 * role_totals.c
 *	  Totals per database and role: each (database, role)'s sessions since
 *	  its stats_reset, exited or live, in a bounded shared hash table.
 *
 * An entry holds the sessions of its (database, role) that exited: at
 * exit each folds its whole slot in (handshake included: it was that
 * session's), less its baseline here, which a reset of this table sets
 * for live sessions.  Readers add the live sessions they may see, less
 * the same baselines, so every session is counted once.  A session is
 * folded only once its role and database are known (sslr_session_identity);
 * one that ends before stays in the cluster totals only.
 *
 * The table holds ssl_renegotiate.max_database_role_totals entries.  When a
 * new (database, role) finds it full, the least used entry is evicted:
 * the one with the fewest TLS bytes, both ways together (an entry a reset
 * zeroed goes first).  Evictions are counted, never silent.  The rows of
 * a dropped role or database are purged (role_drops.c says when), not
 * evicted: a purge removes its entries and marks its live sessions, if
 * any, so that they fold nowhere at exit.
 *
 * Who sees what (docs/reference.md, "Who sees what"): a row is the traffic
 * of its role's sessions, live and exited, so a reader sees the rows of the
 * roles whose privileges it has, and pg_read_all_stats every row.
 *
 * Locking rules:
 *	- The table, its header and the per-slot baselines are written under
 *	  the extension's LWLock (sslr_slots_lock) held exclusively, the lock
 *	  under which totals.c folds an exiting session and frees its slot,
 *	  and every such change is a "move" (slots.c).  Folding, eviction and
 *	  reset hold it so.
 *	- Readers copy the table under the lock held shared (a bounded copy,
 *	  waiting for nothing), then the live slots and their baselines with no
 *	  lock, and copy again if a move overlapped: so they see each session
 *	  exactly once, live in its slot or folded into its entry.
 *	- The postmaster keeps the table across a clean restart (statsfile.c)
 *	  without the lock, when no backend is left or none has started.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "stats/role_totals.h"
#include "stats/slots.h"

int			sslr_max_database_role_totals = SSLR_MAX_DATABASE_ROLE_TOTALS_DEFAULT;

/* What a live session is counted already elsewhere (in connections too). */
typedef struct SslrRoleBaseline
{
	int64		connections;
	SslrTally	tally;
	/* its role or database was dropped: not folded */
	bool		dropped;
} SslrRoleBaseline;

typedef struct SslrRoleShared
{
	SslrRoleInfo info;
	bool		restored_unchecked; /* entries of the file, not yet checked */
	SslrRoleBaseline baseline[FLEXIBLE_ARRAY_MEMBER];	/* per slot */
} SslrRoleShared;

static SslrRoleShared *sslr_role_shared = NULL;
static HTAB *sslr_role_table = NULL;

static Size
sslr_role_shared_size(void)
{
	return add_size(offsetof(SslrRoleShared, baseline),
					mul_size(MaxBackends, sizeof(SslrRoleBaseline)));
}

void
sslr_role_totals_shmem_request(void)
{
	RequestAddinShmemSpace(add_size(sslr_role_shared_size(),
									hash_estimate_size(sslr_max_database_role_totals,
													   sizeof(SslrRoleEntry))));
}

void
sslr_role_totals_shmem_startup(void)
{
	HASHCTL		info;
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_role_shared = ShmemInitStruct("ssl_renegotiate database role totals",
									   sslr_role_shared_size(), &found);
	if (!found)
	{
		memset(sslr_role_shared, 0, sslr_role_shared_size());
		sslr_role_shared->info.stats_reset = GetCurrentTimestamp();
	}
	info.keysize = sizeof(SslrRoleKey);
	info.entrysize = sizeof(SslrRoleEntry);
	sslr_role_table = sslr_shmem_init_hash("ssl_renegotiate database role table",
										   sslr_max_database_role_totals,
										   &info, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

static int64
sslr_entry_usage(const SslrRoleEntry *entry)
{
	return entry->tally.bytes[SSLR_SENT] + entry->tally.bytes[SSLR_RECEIVED];
}

/* Make room for one more entry: evict the least used, and count it. */
static void
sslr_role_evict_one(void)
{
	HASH_SEQ_STATUS scan;
	SslrRoleEntry *entry;
	SslrRoleEntry *victim = NULL;

	hash_seq_init(&scan, sslr_role_table);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (victim == NULL || sslr_entry_usage(entry) < sslr_entry_usage(victim))
			victim = entry;
	if (victim != NULL)
	{
		hash_search(sslr_role_table, &victim->key, HASH_REMOVE, NULL);
		sslr_role_shared->info.evicted++;
	}
}

/*
 * The entry of key, made (zero, since now or since the table's reset) if
 * there is none, evicting to make room.  NULL if it cannot be made: the
 * caller counts it as evicted.  Never raises an error: this runs at exit.
 */
static SslrRoleEntry *
sslr_role_entry(const SslrRoleKey *key)
{
	SslrRoleEntry *entry;
	bool		found;

	entry = hash_search(sslr_role_table, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;
	while (hash_get_num_entries(sslr_role_table) >= sslr_max_database_role_totals &&
		   hash_get_num_entries(sslr_role_table) > 0)
		sslr_role_evict_one();
	entry = hash_search(sslr_role_table, key, HASH_ENTER_NULL, &found);
	if (entry != NULL && !found)
	{
		entry->connections = 0;
		memset(&entry->tally, 0, sizeof(entry->tally));
		/* figures evicted since the table's reset: this row starts now */
		entry->stats_reset = sslr_role_shared->info.evicted > 0 ?
			GetCurrentTimestamp() : sslr_role_shared->info.stats_reset;
	}
	return entry;
}

/*
 * At this backend's exit (totals.c, under the lock held exclusively): fold
 * its slot into the entry of its database and role.
 */
void
sslr_role_totals_fold(int slot_index, const SslrTally *slot_tally)
{
	SslrRoleBaseline *baseline = &sslr_role_shared->baseline[slot_index];
	SslrRoleKey key;
	SslrRoleEntry *entry;

	Assert(LWLockHeldByMeInMode(sslr_slots_lock(), LW_EXCLUSIVE));
	memset(&key, 0, sizeof(key));
	if (!baseline->dropped && sslr_session_identity(&key.dbid, &key.userid))
	{
		entry = sslr_role_entry(&key);
		if (entry == NULL)
			sslr_role_shared->info.evicted++;
		else
		{
			entry->connections += 1 - baseline->connections;
			sslr_tally_add(&entry->tally, slot_tally, 1);
			sslr_tally_add(&entry->tally, &baseline->tally, -1);
		}
	}
	memset(baseline, 0, sizeof(*baseline));
}

/* Where a row's key sits in the array being built. */
typedef struct SslrRowIndex
{
	SslrRoleKey key;
	int			row;
} SslrRowIndex;

/*
 * The table's entries and the live sessions, copied: see the locking
 * rules.  Returns the number of entries in *out, followed by the live
 * sessions (*nlive of them), both palloc'd; *table_reset is the table's.
 */
static int
sslr_copy_role_totals(SslrRoleEntry **out, SslrRoleEntry **live, int *nlive,
					  TimestampTz *table_reset)
{
	int			nslots = sslr_slot_count();
	SslrSlotTally copy;

	*live = palloc(sizeof(SslrRoleEntry) * nslots);
	*out = NULL;
	for (;;)
	{
		uint32		seen = sslr_slots_moves_read_begin();
		HASH_SEQ_STATUS scan;
		SslrRoleEntry *entry;
		int			nrows = 0;

		if (*out != NULL)
			pfree(*out);
		LWLockAcquire(sslr_slots_lock(), LW_SHARED);
		*out = palloc(sizeof(SslrRoleEntry) * (hash_get_num_entries(sslr_role_table) + nslots));
		hash_seq_init(&scan, sslr_role_table);
		while ((entry = hash_seq_search(&scan)) != NULL)
			(*out)[nrows++] = *entry;
		*table_reset = sslr_role_shared->info.stats_reset;
		LWLockRelease(sslr_slots_lock());

		*nlive = 0;
		for (int i = 0; i < nslots; i++)
		{
			SslrRoleEntry *row = &(*live)[*nlive];

			sslr_slots_read_tally(i, &copy);
			if (copy.pid == 0 || !copy.identity_known ||
				sslr_role_shared->baseline[i].dropped)
				continue;
			memset(row, 0, sizeof(SslrRoleEntry));
			row->key.dbid = copy.dbid;
			row->key.userid = copy.userid;
			row->connections = 1 - sslr_role_shared->baseline[i].connections;
			row->tally = copy.tally;
			sslr_tally_add(&row->tally, &sslr_role_shared->baseline[i].tally, -1);
			(*nlive)++;
		}
		if (!sslr_slots_moves_read_retry(seen))
			return nrows;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * The rows of the view, in *rows (palloc'd); returns their number: those
 * for whose key include says yes, each with its exited sessions and its
 * live ones.  include runs with no lock held, so that it may do catalog
 * lookups, and purge (sslr_role_totals_purge).
 */
int
sslr_read_role_totals(SslrRoleEntry **rows, bool (*include) (const SslrRoleKey *key))
{
	SslrRoleEntry *all;
	SslrRoleEntry *live;
	SslrRoleEntry *out;
	HASHCTL		ctl;
	HTAB	   *index;
	TimestampTz table_reset;
	int			nall;
	int			nlive;
	int			nrows = 0;

	nall = sslr_copy_role_totals(&all, &live, &nlive, &table_reset);
	out = palloc(sizeof(SslrRoleEntry) * (nall + nlive + 1));

	ctl.keysize = sizeof(SslrRoleKey);
	ctl.entrysize = sizeof(SslrRowIndex);
	ctl.hcxt = CurrentMemoryContext;
	index = hash_create("ssl_renegotiate database role rows", nall + nlive + 1, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int i = 0; i < nall; i++)
	{
		if (!include(&all[i].key))
			continue;
		out[nrows] = all[i];
		((SslrRowIndex *) hash_search(index, &all[i].key, HASH_ENTER, NULL))->row = nrows;
		nrows++;
	}
	for (int i = 0; i < nlive; i++)
	{
		SslrRowIndex *at;
		bool		found;

		if (!include(&live[i].key))
			continue;
		at = hash_search(index, &live[i].key, HASH_ENTER, &found);
		if (!found)
		{
			at->row = nrows++;
			out[at->row] = live[i];
			out[at->row].stats_reset = table_reset;
			continue;
		}
		out[at->row].connections += live[i].connections;
		sslr_tally_add(&out[at->row].tally, &live[i].tally, 1);
	}
	hash_destroy(index);
	pfree(all);
	pfree(live);
	*rows = out;
	return nrows;
}

void
sslr_role_totals_read_info(SslrRoleInfo *info)
{
	LWLockAcquire(sslr_slots_lock(), LW_SHARED);
	*info = sslr_role_shared->info;
	LWLockRelease(sslr_slots_lock());
}

static bool
sslr_key_matches(const SslrRoleKey *key, const Oid *dbid, const Oid *userid)
{
	return (dbid == NULL || key->dbid == *dbid) &&
		(userid == NULL || key->userid == *userid);
}

/*
 * Zero the entries of this database and role (NULL: any).  Without either,
 * the whole table goes, its evictions too.  Live sessions keep their own
 * counters, so their current counts become their baselines.
 */
void
sslr_role_totals_reset(const Oid *dbid, const Oid *userid)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		all = dbid == NULL && userid == NULL;
	HASH_SEQ_STATUS scan;
	SslrRoleEntry *entry;
	SslrSlotTally copy;

	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_slots_moves_begin();
	hash_seq_init(&scan, sslr_role_table);
	while ((entry = hash_seq_search(&scan)) != NULL)
	{
		if (all)
			hash_search(sslr_role_table, &entry->key, HASH_REMOVE, NULL);
		else if (sslr_key_matches(&entry->key, dbid, userid))
		{
			entry->connections = 0;
			memset(&entry->tally, 0, sizeof(entry->tally));
			entry->stats_reset = now;
		}
	}
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		SslrRoleKey key;

		sslr_slots_read_tally(i, &copy);
		if (copy.pid == 0 || (!all && !copy.identity_known))
			continue;
		key.dbid = copy.dbid;
		key.userid = copy.userid;
		if (!sslr_key_matches(&key, dbid, userid))
			continue;
		sslr_role_shared->baseline[i].connections = 1;
		sslr_role_shared->baseline[i].tally = copy.tally;
	}
	if (all)
	{
		sslr_role_shared->info.evicted = 0;
		sslr_role_shared->info.stats_reset = now;
	}
	sslr_slots_moves_end();
	LWLockRelease(sslr_slots_lock());
}

/*
 * A role or a database was dropped (userid or dbid given, the other NULL):
 * its entries go, and its live sessions, if any, fold nowhere when they
 * exit, so that nothing is left for an object that reuses the OID.  Their
 * traffic stays in the cluster totals (totals.c), which count apart.  Not
 * an eviction.  Never raises an error: this runs at commit.
 */
void
sslr_role_totals_purge(const Oid *dbid, const Oid *userid)
{
	HASH_SEQ_STATUS scan;
	SslrRoleEntry *entry;
	SslrSlotTally copy;

	Assert((dbid == NULL) != (userid == NULL));
	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_slots_moves_begin();
	hash_seq_init(&scan, sslr_role_table);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (sslr_key_matches(&entry->key, dbid, userid))
			hash_search(sslr_role_table, &entry->key, HASH_REMOVE, NULL);
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		SslrRoleKey key;

		sslr_slots_read_tally(i, &copy);
		if (copy.pid == 0 || !copy.identity_known)
			continue;
		key.dbid = copy.dbid;
		key.userid = copy.userid;
		if (sslr_key_matches(&key, dbid, userid))
			sslr_role_shared->baseline[i].dropped = true;
	}
	sslr_slots_moves_end();
	LWLockRelease(sslr_slots_lock());
}

/*
 * Entries restored from the statistics file whose roles and databases no
 * backend has checked yet (role_drops.c checks them at the first login).
 */
bool
sslr_role_totals_unchecked(void)
{
	bool		unchecked;

	LWLockAcquire(sslr_slots_lock(), LW_SHARED);
	unchecked = sslr_role_shared->restored_unchecked;
	LWLockRelease(sslr_slots_lock());
	return unchecked;
}

void
sslr_role_totals_checked(void)
{
	LWLockAcquire(sslr_slots_lock(), LW_EXCLUSIVE);
	sslr_role_shared->restored_unchecked = false;
	LWLockRelease(sslr_slots_lock());
}

/*
 * At postmaster exit, when no backend is left (so without the lock): the
 * table's header and size.  Returns false if there is no shared memory.
 */
bool
sslr_role_totals_to_keep(SslrRoleInfo *info, int64 *nentries)
{
	if (sslr_role_table == NULL)
		return false;
	*info = sslr_role_shared->info;
	*nentries = hash_get_num_entries(sslr_role_table);
	return true;
}

/* In the postmaster, without the lock: every entry, to fn. */
void
sslr_role_totals_foreach(void (*fn) (const SslrRoleEntry *entry, void *arg), void *arg)
{
	HASH_SEQ_STATUS scan;
	SslrRoleEntry *entry;

	hash_seq_init(&scan, sslr_role_table);
	while ((entry = hash_seq_search(&scan)) != NULL)
		fn(entry, arg);
}

/* qsort: most used first */
static int
sslr_entry_usage_desc(const void *a, const void *b)
{
	int64		ua = sslr_entry_usage((const SslrRoleEntry *) a);
	int64		ub = sslr_entry_usage((const SslrRoleEntry *) b);

	return (ua < ub) - (ua > ub);
}

/*
 * When the postmaster creates shared memory: the table kept last time
 * (sorted here).  If the setting was lowered since, the most used entries
 * are kept and the others counted as evicted.
 */
void
sslr_role_totals_restore(const SslrRoleInfo *info, SslrRoleEntry *entries, int64 nentries)
{
	sslr_role_shared->info = *info;
	sslr_role_shared->restored_unchecked = nentries > 0;
	if (nentries > 0)
		qsort(entries, nentries, sizeof(SslrRoleEntry), sslr_entry_usage_desc);
	for (int64 i = 0; i < nentries; i++)
	{
		SslrRoleEntry *entry = NULL;

		if (i < sslr_max_database_role_totals)
			entry = sslr_role_entry(&entries[i].key);
		if (entry == NULL)
			sslr_role_shared->info.evicted++;
		else
			*entry = entries[i];
	}
}

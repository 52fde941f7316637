/*-------------------------------------------------------------------------
 *
 * role_drops.c
 *	  Rows of dropped roles and databases: purged from the totals per
 *	  database and role (role_totals.c), so that none is shown with a NULL
 *	  name, none outweighs a live pair when the table must evict, and an
 *	  object that reuses the OID starts from zero.
 *
 * Where a dropped role's or database's rows go:
 *	- At the commit of DROP ROLE or DROP DATABASE run with the library
 *	  loaded (ProcessUtility_hook): the OIDs are looked up before the
 *	  statement, kept per subtransaction once it succeeds, and purged when
 *	  the transaction commits; a rollback (or ROLLBACK TO SAVEPOINT) keeps
 *	  the rows.  A dropped role's live sessions, which DROP ROLE does not
 *	  end, then fold nowhere at exit.  Before any later CREATE can reuse
 *	  the OID, nothing of the old object is left.
 *	- At the first login after start, when entries were restored from the
 *	  statistics file (statsfile.c): the postmaster cannot read catalogs,
 *	  so the login's own transaction (InitPostgres runs authentication in
 *	  one, and pg_authid and pg_database are shared catalogs, readable
 *	  from any database) checks each, before that session, or any later
 *	  one, can create a role.  That catches drops made while the library
 *	  was not loaded.
 *	- Whenever a reader of the view finds a row whose role or database no
 *	  longer exists: it is not shown, and purged.  That catches drops the
 *	  library did not see run: replayed on a standby, or committed by
 *	  COMMIT PREPARED.
 * A backend with no transaction (one exiting, folding its session) cannot
 * read the catalogs, so eviction relies on the above: the table holds no
 * row of an object dropped while the library was loaded.
 *
 * A reader whose own transaction has written (its DROP ROLE may yet roll
 * back) hides such rows but does not purge them.  What a purged row
 * counted stays in the cluster totals, which count apart.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "compat.h"
#include "stats/role_drops.h"
#include "stats/role_totals.h"

/* A role (userid) or a database (dbid) dropped, the other InvalidOid. */
typedef struct SslrDrop
{
	Oid			dbid;
	Oid			userid;
	SubTransactionId subid;		/* the subtransaction that dropped it */
} SslrDrop;

/* The drops of this transaction, in TopTransactionContext. */
static List *sslr_pending_drops = NIL;
static bool sslr_callbacks_registered = false;

static void
sslr_purge_drop(const SslrDrop *drop)
{
	sslr_role_totals_purge(OidIsValid(drop->dbid) ? &drop->dbid : NULL,
						   OidIsValid(drop->userid) ? &drop->userid : NULL);
}

static void
sslr_role_drops_xact(XactEvent event, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			foreach(lc, sslr_pending_drops)
				sslr_purge_drop(lfirst(lc));
			sslr_pending_drops = NIL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* after PREPARE: purged where found, see above */
			sslr_pending_drops = NIL;
			break;
		default:
			break;
	}
}

static void
sslr_role_drops_subxact(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	foreach(lc, sslr_pending_drops)
	{
		SslrDrop   *drop = lfirst(lc);

		if (drop->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			drop->subid = parentSubid;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
			sslr_pending_drops = foreach_delete_current(sslr_pending_drops, lc);
	}
}

static List *
sslr_add_drop(List *dropping, Oid dbid, Oid userid)
{
	SslrDrop   *drop;

	if (!OidIsValid(dbid) && !OidIsValid(userid))
		return dropping;
	drop = palloc0(sizeof(SslrDrop));
	drop->dbid = dbid;
	drop->userid = userid;
	return lappend(dropping, drop);
}

/*
 * Before a utility statement: the OIDs that DROP ROLE or DROP DATABASE is
 * about to drop (NIL for any other statement), looked up while their names
 * still lead to them.
 */
List *
sslr_role_drops_before(Node *stmt)
{
	List	   *dropping = NIL;
	ListCell   *lc;

	if (IsA(stmt, DropRoleStmt))
	{
		foreach(lc, ((DropRoleStmt *) stmt)->roles)
		{
			RoleSpec   *spec = lfirst(lc);

			/* DROP ROLE refuses CURRENT_USER and the like */
			if (spec->roletype == ROLESPEC_CSTRING)
				dropping = sslr_add_drop(dropping, InvalidOid,
										 get_role_oid(spec->rolename, true));
		}
	}
	else if (IsA(stmt, DropdbStmt))
		dropping = sslr_add_drop(dropping,
								 get_database_oid(((DropdbStmt *) stmt)->dbname, true),
								 InvalidOid);
	return dropping;
}

/* After the statement succeeded: purge what it dropped at commit. */
void
sslr_role_drops_after(List *dropping)
{
	MemoryContext old;
	ListCell   *lc;

	if (dropping == NIL)
		return;
	if (!sslr_callbacks_registered)
	{
		RegisterXactCallback(sslr_role_drops_xact, NULL);
		RegisterSubXactCallback(sslr_role_drops_subxact, NULL);
		sslr_callbacks_registered = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	foreach(lc, dropping)
	{
		SslrDrop   *drop = palloc(sizeof(SslrDrop));

		*drop = *(SslrDrop *) lfirst(lc);
		drop->subid = GetCurrentSubTransactionId();
		sslr_pending_drops = lappend(sslr_pending_drops, drop);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Does the key's role exist, and its database (0: none, a physical
 * walsender)?  If not, its rows are purged, unless this transaction has
 * written: what it sees gone may come back at its rollback.  With no
 * transaction nothing can be checked: yes.
 */
bool
sslr_role_drops_pair_alive(const SslrRoleKey *key)
{
	bool		may_purge;

	if (!IsTransactionState())
		return true;
	may_purge = !TransactionIdIsValid(GetTopTransactionIdIfAny());
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(key->userid)))
	{
		if (may_purge)
			sslr_role_totals_purge(NULL, &key->userid);
		return false;
	}
	if (OidIsValid(key->dbid) &&
		!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(key->dbid)))
	{
		if (may_purge)
			sslr_role_totals_purge(&key->dbid, NULL);
		return false;
	}
	return true;
}

/*
 * At a login, in its transaction: once after start, the entries restored
 * from the statistics file lose those of roles and databases dropped since
 * they were written.
 */
void
sslr_role_drops_check_restored(void)
{
	SslrRoleEntry *rows;

	if (!IsTransactionState() || !sslr_role_totals_unchecked())
		return;
	(void) sslr_read_role_totals(&rows, sslr_role_drops_pair_alive);
	pfree(rows);
	sslr_role_totals_checked();
}

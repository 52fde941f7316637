/*-------------------------------------------------------------------------
 *
 * sql_totals.c
 *	  SQL-callable functions of the totals: the cluster's, those per
 *	  database and role, and their resets.
 *
 * Visibility is sql_api.c's rule: other roles' traffic, live or exited,
 * one session or summed, is for pg_read_all_stats only
 * (docs/reference.md, "Who sees what").  So the cluster totals, which sum
 * every role's sessions and those that never authenticated, show their
 * counters to pg_read_all_stats only (NULL to anyone else), and the rows
 * per database and role are those of the roles whose privileges the
 * caller has (sslr_may_see), and whose role and database still exist
 * (role_drops.c).  Reading takes no lock that a login or an exit needs
 * (totals.c, role_totals.c).
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "sql_api.h"
#include "stats/role_drops.h"
#include "stats/role_totals.h"
#include "stats/totals.h"

PG_FUNCTION_INFO_V1(ssl_renegotiate_totals_1_0);
PG_FUNCTION_INFO_V1(ssl_renegotiate_reset_1_0);
PG_FUNCTION_INFO_V1(ssl_renegotiate_database_role_totals_1_2);
PG_FUNCTION_INFO_V1(ssl_renegotiate_database_role_totals_info_1_2);
PG_FUNCTION_INFO_V1(ssl_renegotiate_reset_database_role_totals_1_2);

#define SSLR_TOTALS_COLS 13
#define SSLR_ROLE_TOTALS_COLS (2 + SSLR_TOTALS_COLS)

/* The SSLR_TOTALS_COLS columns of the totals, connections to stats_reset. */
static void
sslr_put_totals(Datum *values, int64 connections, const SslrTally *t,
				TimestampTz stats_reset)
{
	int			c = 0;

	values[c++] = Int64GetDatum(connections);
	values[c++] = Int64GetDatum(t->bytes[SSLR_SENT]);
	values[c++] = Int64GetDatum(t->bytes[SSLR_RECEIVED]);
	values[c++] = Int64GetDatum(t->records[SSLR_SENT]);
	values[c++] = Int64GetDatum(t->records[SSLR_RECEIVED]);
	values[c++] = Int64GetDatum(t->rekeys[SSLR_SENT]);
	values[c++] = Int64GetDatum(t->rekeys[SSLR_RECEIVED]);
	values[c++] = Int64GetDatum(t->rekey_failures);
	values[c++] = Float8GetDatum(sslr_us_to_ms(t->rekey_time_us));
	values[c++] = Int64GetDatum(t->rekeys_skipped);
	values[c++] = Int64GetDatum(t->peer_renegotiations_refused);
	values[c++] = Int64GetDatum(t->terminations);
	values[c++] = TimestampTzGetDatum(stats_reset);
	Assert(c == SSLR_TOTALS_COLS);
}

Datum
ssl_renegotiate_totals_1_0(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	SslrTotals	totals;
	Datum		values[SSLR_TOTALS_COLS];
	bool		nulls[SSLR_TOTALS_COLS] = {0};

	sslr_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	sslr_read_totals(&totals);
	sslr_put_totals(values, totals.connections, &totals.tally, totals.stats_reset);
	if (!sslr_may_see_all())
	{
		/* every counter NULL: only the time of the last reset is shown */
		for (int c = 0; c < SSLR_TOTALS_COLS - 1; c++)
			nulls[c] = true;
	}

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

Datum
ssl_renegotiate_reset_1_0(PG_FUNCTION_ARGS pg_attribute_unused())
{
	sslr_require_preload();
	sslr_reset_totals();
	PG_RETURN_VOID();
}

/*
 * A row is shown if its role and database exist (a dropped one's rows are
 * purged, role_drops.c) and the caller may see that role's traffic.
 */
static bool
sslr_row_shown(const SslrRoleKey *key)
{
	return sslr_role_pair_alive(key) && sslr_may_see(key->userid);
}

/* One row per (database, role), for those who may see that role's. */
Datum
ssl_renegotiate_database_role_totals_1_2(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SslrRoleEntry *rows;
	int			nrows;

	sslr_require_preload();
	InitMaterializedSRF(fcinfo, 0);
	nrows = sslr_read_role_totals(&rows, sslr_row_shown);
	for (int i = 0; i < nrows; i++)
	{
		Datum		values[SSLR_ROLE_TOTALS_COLS];
		bool		nulls[SSLR_ROLE_TOTALS_COLS] = {0};

		values[0] = ObjectIdGetDatum(rows[i].key.dbid);
		values[1] = ObjectIdGetDatum(rows[i].key.userid);
		sslr_put_totals(values + 2, rows[i].connections, &rows[i].tally,
						rows[i].stats_reset);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

Datum
ssl_renegotiate_database_role_totals_info_1_2(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	SslrRoleInfo info;
	Datum		values[2];
	bool		nulls[2] = {0};

	sslr_require_preload();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	sslr_read_role_totals_info(&info);
	values[0] = Int64GetDatum(info.evicted);
	values[1] = TimestampTzGetDatum(info.stats_reset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* Not strict: a NULL database or role means every one. */
Datum
ssl_renegotiate_reset_database_role_totals_1_2(PG_FUNCTION_ARGS)
{
	Oid			dbid = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
	Oid			userid = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);

	sslr_require_preload();
	sslr_reset_role_totals(PG_ARGISNULL(0) ? NULL : &dbid,
						   PG_ARGISNULL(1) ? NULL : &userid);
	PG_RETURN_VOID();
}

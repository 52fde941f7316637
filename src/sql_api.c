/*-------------------------------------------------------------------------
 *
 * sql_api.c
 *	  The SQL-callable functions: the rows behind the activity view, the
 *	  request for new keys, accessors for the current session, the totals
 *	  (the cluster's, those per database and role) and their resets, and
 *	  the visibility rule they all follow.
 *
 * Visibility follows pg_stat_activity: every TLS backend is listed with its
 * pid, but its counters are NULL unless the caller has pg_read_all_stats or
 * the privileges of the backend's role.  The same rule holds for traffic
 * after the session: other roles' traffic, live or exited, one session or
 * summed, is for pg_read_all_stats only (docs/reference.md, "Who sees
 * what").  So the cluster totals, which sum every role's sessions and
 * those that never authenticated, show their counters to
 * pg_read_all_stats only (NULL to anyone else), and the rows per database
 * and role are those of the roles whose privileges the caller has
 * (sslr_may_see), and whose role and database still exist (role_drops.c).
 *
 * The limits in force (1.2's last columns) are what each backend published
 * in its slot, since no backend can read another's settings (key_limits.c).
 *
 * Reading other backends' state, this file takes no lock of its own:
 * slots are copied with their change-count protocol (sslr_slots_read, which
 * backs off holding no lock), and a request is counted under the
 * extension's LWLock held shared (slots.c); totals are read without a lock
 * that a login or an exit needs (totals.c, role_totals.c).  This session's
 * own slot is read as it is: only this backend writes it.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "libpq/libpq-be.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "stats/role_drops.h"
#include "stats/role_totals.h"
#include "stats/slots.h"
#include "stats/totals.h"

PG_FUNCTION_INFO_V1(ssl_renegotiate_activity_1_0);
PG_FUNCTION_INFO_V1(ssl_renegotiate_activity_1_1);
PG_FUNCTION_INFO_V1(ssl_renegotiate_activity_1_2);
PG_FUNCTION_INFO_V1(ssl_renegotiate_activity_1_3);
PG_FUNCTION_INFO_V1(ssl_renegotiate_rekey_1_1);
PG_FUNCTION_INFO_V1(ssl_renegotiate_bytes_sent);
PG_FUNCTION_INFO_V1(ssl_renegotiate_bytes_received);
PG_FUNCTION_INFO_V1(ssl_renegotiate_records_sent);
PG_FUNCTION_INFO_V1(ssl_renegotiate_records_received);
PG_FUNCTION_INFO_V1(ssl_renegotiate_rekeys_sent);
PG_FUNCTION_INFO_V1(ssl_renegotiate_rekeys_received);
PG_FUNCTION_INFO_V1(ssl_renegotiate_totals_1_0);
PG_FUNCTION_INFO_V1(ssl_renegotiate_reset_1_0);
PG_FUNCTION_INFO_V1(ssl_renegotiate_database_role_totals_1_2);
PG_FUNCTION_INFO_V1(ssl_renegotiate_database_role_totals_info_1_2);
PG_FUNCTION_INFO_V1(ssl_renegotiate_reset_database_role_totals_1_2);

/*
 * The SQL objects of each version call the C function of that version:
 * the library serves a 1.0 installation until ALTER EXTENSION UPDATE.
 */
typedef enum SslrApiVersion
{
	SSLR_API_V1_0,
	SSLR_API_V1_1,
	SSLR_API_V1_2
} SslrApiVersion;

#define SSLR_ACTIVITY_COLS_V1_0 23
#define SSLR_ACTIVITY_COLS_V1_1 26
#define SSLR_LIMITS_COLS 4		/* 1.2's: byte_limit ... tls12 */
#define SSLR_ACTIVITY_COLS_V1_2 (SSLR_ACTIVITY_COLS_V1_1 + SSLR_LIMITS_COLS)
#define SSLR_ACTIVITY_COLS SSLR_ACTIVITY_COLS_V1_2

static const int sslr_activity_cols[] = {
	[SSLR_API_V1_0] = SSLR_ACTIVITY_COLS_V1_0,
	[SSLR_API_V1_1] = SSLR_ACTIVITY_COLS_V1_1,
	[SSLR_API_V1_2] = SSLR_ACTIVITY_COLS_V1_2
};

/* ERROR unless loaded by shared_preload_libraries */
static void
sslr_require_preload(void)
{
	if (!sslr_slots_ready())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ssl_renegotiate must be loaded via shared_preload_libraries"),
				 errhint("Add ssl_renegotiate to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/* May the caller see every role's traffic (pg_read_all_stats)? */
static bool
sslr_may_see_all(void)
{
	return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
}

/* May the caller see the traffic of this role's sessions? */
static bool
sslr_may_see(Oid userid)
{
	return sslr_may_see_all() || has_privs_of_role(GetUserId(), userid);
}

static double
sslr_us_to_ms(int64 us)
{
	return us / 1000.0;
}

/* A limit in bytes, or NULL when it is off. */
static void
sslr_bytes_or_null(int64 bytes, Datum *value, bool *isnull)
{
	*isnull = bytes <= 0;
	*value = Int64GetDatum(bytes);
}

/* ssl_renegotiate.interval in force as an interval, or NULL when off. */
static void
sslr_interval_or_null(int64 ms, Datum *value, bool *isnull)
{
	Interval   *span;

	*isnull = ms <= 0;
	if (*isnull)
		return;
	span = palloc0(sizeof(Interval));
	span->time = ms * INT64CONST(1000);
	*value = IntervalPGetDatum(span);
}

/* The ssl_renegotiate.tls12 value naming a policy, as SHOW says it. */
static const char *
sslr_tls12_name(SslrTls12Policy policy)
{
	switch (policy)
	{
		case SSLR_TLS12_RENEGOTIATE:
			return "renegotiate";
		case SSLR_TLS12_WARN:
			return "warn";
		case SSLR_TLS12_TERMINATE:
			return "terminate";
	}
	return "unknown";
}

/*
 * 1.2's columns: the limits the backend enforces, as it published them
 * (NULL until it starts enforcing, and for a limit that is off).
 */
static int
sslr_limits_columns(const SslrLimitsInForce *limits, Datum *values, bool *nulls)
{
	int			c = 0;

	if (!limits->known)
	{
		for (; c < SSLR_LIMITS_COLS; c++)
			nulls[c] = true;
		return c;
	}
	sslr_bytes_or_null(limits->byte_limit, &values[c], &nulls[c]);
	c++;
	sslr_bytes_or_null(limits->hard_limit, &values[c], &nulls[c]);
	c++;
	sslr_interval_or_null(limits->interval_ms, &values[c], &nulls[c]);
	c++;
	values[c++] = CStringGetTextDatum(sslr_tls12_name(limits->tls12));
	Assert(c == SSLR_LIMITS_COLS);
	return c;
}

/* Most bytes carried by one key of this direction, the current one included. */
static int64
sslr_max_per_key(const SslrConnStats *stats, SslrDirection dir)
{
	return Max(stats->max_bytes_per_key[dir], stats->bytes_under_key[dir]);
}

/* The rows of every TLS backend, or (only_pid != 0) of that pid only. */
static Datum
sslr_activity(FunctionCallInfo fcinfo, SslrApiVersion version, int only_pid)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			ncols = sslr_activity_cols[version];
	SslrSlot	slot;

	sslr_require_preload();
	InitMaterializedSRF(fcinfo, 0);

	for (int i = 0; i < sslr_slot_count(); i++)
	{
		Datum		values[SSLR_ACTIVITY_COLS];
		bool		nulls[SSLR_ACTIVITY_COLS];
		const SslrConnStats *s = &slot.stats;
		int			c = 0;

		sslr_slots_read(i, &slot);
		if (slot.pid == 0 || (only_pid != 0 && slot.pid != only_pid))
			continue;

		memset(nulls, 0, sizeof(nulls));
		values[c++] = Int32GetDatum(slot.pid);
		values[c++] = ObjectIdGetDatum(slot.userid);
		values[c++] = CStringGetTextDatum(slot.is_walsender ? "walsender" : "client backend");

		if (!sslr_may_see(slot.userid))
		{
			for (; c < ncols; c++)
				nulls[c] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			continue;
		}

		values[c++] = CStringGetTextDatum(slot.version);
		values[c++] = CStringGetTextDatum(slot.cipher);
		values[c++] = Int64GetDatum(s->tally.bytes[SSLR_SENT]);
		values[c++] = Int64GetDatum(s->tally.bytes[SSLR_RECEIVED]);
		values[c++] = Int64GetDatum(s->tally.records[SSLR_SENT]);
		values[c++] = Int64GetDatum(s->tally.records[SSLR_RECEIVED]);
		values[c++] = Int64GetDatum(s->tally.rekeys[SSLR_SENT]);
		values[c++] = Int64GetDatum(s->tally.rekeys[SSLR_RECEIVED]);
		values[c++] = Int64GetDatum(s->tally.rekey_failures);
		values[c++] = Float8GetDatum(sslr_us_to_ms(s->tally.rekey_time_us));
		if (s->last_rekey != 0)
			values[c++] = TimestampTzGetDatum(s->last_rekey);
		else
			nulls[c++] = true;
		values[c++] = Int64GetDatum(s->bytes_under_key[SSLR_SENT]);
		values[c++] = Int64GetDatum(s->bytes_under_key[SSLR_RECEIVED]);
		values[c++] = Int64GetDatum(sslr_max_per_key(s, SSLR_SENT));
		values[c++] = Int64GetDatum(sslr_max_per_key(s, SSLR_RECEIVED));
		values[c++] = BoolGetDatum(s->rekey_pending);
		values[c++] = Int64GetDatum(s->tally.rekeys_skipped);
		values[c++] = Int64GetDatum(s->tally.peer_renegotiations_refused);
		values[c++] = Int64GetDatum(s->records_under_key[SSLR_SENT]);
		values[c++] = Int64GetDatum(s->records_under_key[SSLR_RECEIVED]);
		if (version >= SSLR_API_V1_1)
		{
			int64		requests = sslr_slots_read_requests(i);

			if (s->record_limit != SSLR_NO_LIMIT)
				values[c++] = Int64GetDatum(s->record_limit);
			else
				nulls[c++] = true;
			values[c++] = Int64GetDatum(requests);
			values[c++] = BoolGetDatum(requests != s->requests_seen || s->request_pending);
		}
		if (version >= SSLR_API_V1_2)
		{
			int			limits_cols PG_USED_FOR_ASSERTS_ONLY =
				sslr_limits_columns(&slot.limits, &values[c], &nulls[c]);

			Assert(c + limits_cols == ncols);
		}
		else
			Assert(c == ncols);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	return (Datum) 0;
}

Datum
ssl_renegotiate_activity_1_0(PG_FUNCTION_ARGS)
{
	return sslr_activity(fcinfo, SSLR_API_V1_0, 0);
}

Datum
ssl_renegotiate_activity_1_1(PG_FUNCTION_ARGS)
{
	return sslr_activity(fcinfo, SSLR_API_V1_1, 0);
}

/*
 * 1.2: ssl_renegotiate_activity(pid), not strict: NULL gives every TLS
 * backend (the view), as pg_stat_get_activity does.  A pid that is not a
 * TLS backend's, or not positive, gives no row.
 */
Datum
ssl_renegotiate_activity_1_2(PG_FUNCTION_ARGS)
{
	int			only_pid = 0;

	if (!PG_ARGISNULL(0))
	{
		only_pid = PG_GETARG_INT32(0);
		if (only_pid <= 0)
			only_pid = -1;		/* matches no backend */
	}
	return sslr_activity(fcinfo, SSLR_API_V1_2, only_pid);
}

/*
 * 1.3: ssl_renegotiate_activity_1_3(pid), the columns 1.3 added to the
 * view, which joins them on pid (so that 1.2's function, and the views and
 * grants on it, stay as they are).  NULL: every TLS backend.
 */
#define SSLR_ACTIVITY_1_3_COLS 2

Datum
ssl_renegotiate_activity_1_3(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			only_pid = 0;
	SslrSlot	slot;

	if (!PG_ARGISNULL(0))
		only_pid = PG_GETARG_INT32(0) > 0 ? PG_GETARG_INT32(0) : -1;

	sslr_require_preload();
	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < sslr_slot_count(); i++)
	{
		Datum		values[SSLR_ACTIVITY_1_3_COLS];
		bool		nulls[SSLR_ACTIVITY_1_3_COLS] = {0};

		sslr_slots_read(i, &slot);
		if (slot.pid == 0 || (only_pid != 0 && slot.pid != only_pid))
			continue;
		values[0] = Int32GetDatum(slot.pid);
		if (sslr_may_see(slot.userid))
			values[1] = Int64GetDatum(slot.stats.renegotiations_deferred);
		else
			nulls[1] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * Ask a TLS backend to rotate its keys in both directions, at its next I/O.
 * Never waits for it.  Permissions as for pg_cancel_backend.
 */
Datum
ssl_renegotiate_rekey_1_1(PG_FUNCTION_ARGS)
{
	int			pid = PG_GETARG_INT32(0);
	PGPROC	   *proc;
	Oid			roleid;

	sslr_require_preload();
	proc = BackendPidGetProc(pid);
	if (proc == NULL)
	{
		ereport(WARNING,
				(errmsg("PID %d is not a PostgreSQL backend process", pid)));
		PG_RETURN_BOOL(false);
	}

	roleid = proc->roleId;
	if ((!OidIsValid(roleid) || superuser_arg(roleid)) && !superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to rotate the TLS keys of this process"),
				 errdetail("Only roles with the %s attribute may rotate the keys of processes of roles with the %s attribute.",
						   "SUPERUSER", "SUPERUSER")));
	if (!has_privs_of_role(GetUserId(), roleid) &&
		!has_privs_of_role(GetUserId(), ROLE_PG_SIGNAL_BACKEND))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to rotate the TLS keys of this process"),
				 errdetail("Only roles with privileges of the role whose process it is, or of the \"%s\" role, may rotate its keys.",
						   "pg_signal_backend")));

	if (!sslr_slots_request_rekey(pid))
	{
		ereport(WARNING,
				(errmsg("PID %d is not a backend on a TLS connection", pid),
				 errhint("See pg_stat_ssl, or ssl_renegotiate_activity, for the backends that use TLS.")));
		PG_RETURN_BOOL(false);
	}
	PG_RETURN_BOOL(true);
}

/*
 * This session's own counters: NULL when the connection does not use TLS.
 * Only this backend writes its slot, so it reads without the protocol.
 */
static const SslrConnStats *
sslr_session_stats(void)
{
	sslr_require_preload();
	if (MyProcPort == NULL || !MyProcPort->ssl_in_use)
		return NULL;
	return &sslr_my_slot->stats;
}

#define SSLR_SESSION_ACCESSOR(fname, expr) \
Datum \
fname(PG_FUNCTION_ARGS) \
{ \
	const SslrConnStats *s = sslr_session_stats(); \
	if (s == NULL) \
		PG_RETURN_NULL(); \
	PG_RETURN_INT64(expr); \
}

SSLR_SESSION_ACCESSOR(ssl_renegotiate_bytes_sent, s->tally.bytes[SSLR_SENT])
SSLR_SESSION_ACCESSOR(ssl_renegotiate_bytes_received, s->tally.bytes[SSLR_RECEIVED])
SSLR_SESSION_ACCESSOR(ssl_renegotiate_records_sent, s->tally.records[SSLR_SENT])
SSLR_SESSION_ACCESSOR(ssl_renegotiate_records_received, s->tally.records[SSLR_RECEIVED])
SSLR_SESSION_ACCESSOR(ssl_renegotiate_rekeys_sent, s->tally.rekeys[SSLR_SENT])
SSLR_SESSION_ACCESSOR(ssl_renegotiate_rekeys_received, s->tally.rekeys[SSLR_RECEIVED])

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

	sslr_totals_read(&totals);
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
	sslr_totals_reset();
	PG_RETURN_VOID();
}

/*
 * A row is shown if its role and database exist (a dropped one's rows are
 * purged, role_drops.c) and the caller may see that role's traffic.
 */
static bool
sslr_row_shown(const SslrRoleKey *key)
{
	return sslr_role_drops_pair_alive(key) && sslr_may_see(key->userid);
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
	sslr_role_totals_read_info(&info);
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
	sslr_role_totals_reset(PG_ARGISNULL(0) ? NULL : &dbid,
						   PG_ARGISNULL(1) ? NULL : &userid);
	PG_RETURN_VOID();
}

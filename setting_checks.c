/*-------------------------------------------------------------------------
 *
 * setting_checks.c
 *	  Defining the ssl_renegotiate.* settings, and refusing values that
 *	  would switch protection off by accident.
 *
 * Three rules, README "Settings":
 *	- No silent off.  byte_limit, hard_limit and interval are real settings
 *	  (settings.h says why), so a check sees '100B' as 0.098 kB, not as 0:
 *	  anything but 0 below the smallest value is refused, from every level
 *	  (a file, ALTER SYSTEM, SET, ALTER ROLE/DATABASE SET).  A refused file
 *	  value keeps the old one, with PostgreSQL's usual LOG line.
 *	- Limits that fit.  Where a check sees both values -- SET, against
 *	  what this session has in force, and ALTER SYSTEM, against what the
 *	  files will say after it (postgresql.auto.conf) -- a hard_limit
 *	  less than byte_limit + the margin is refused.  Elsewhere (a file read
 *	  in any order, ALTER ROLE and ALTER DATABASE, which only meet in a
 *	  session) key_limits.c enforces the safe rule and says so.  Each
 *	  value's level travels in its "extra", for that line.
 *	- The old name.  ssl_renegotiate.limit (1.0) is read from the files
 *	  only and sets byte_limit unless byte_limit itself was set; the
 *	  postmaster warns at each load that reads it.
 *
 * Check hooks only decide; assign hooks only set flags (policy.c,
 * key_limits.c).  The one ereport here is the postmaster's WARNING about
 * the old name, from a check hook, as PostgreSQL's own checks do.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/guc.h"

#include <math.h>

#include "compat.h"
#include "key_limits.h"
#include "policy.h"
#include "role_totals.h"
#include "setting_checks.h"
#include "settings.h"

/* What a value's "extra" carries: the level it came from. */
typedef struct SslrSettingExtra
{
	GucSource	source;
} SslrSettingExtra;

static const struct config_enum_entry sslr_tls12_options[] = {
	{"renegotiate", SSLR_TLS12_RENEGOTIATE, false},
	{"warn", SSLR_TLS12_WARN, false},
	{"terminate", SSLR_TLS12_TERMINATE, false},
	{NULL, 0, false}
};

static bool sslr_in_alter_system = false;

/*
 * Around a utility statement (ssl_renegotiate.c's ProcessUtility_hook):
 * ALTER SYSTEM checks a value as if from a file (PGC_S_FILE); this tells
 * it from a file being read, so that it can be refused like a SET.
 * Returns what sslr_alter_system_leave restores, even after an error.
 */
bool
sslr_alter_system_enter(Node *stmt)
{
	bool		saved = sslr_in_alter_system;

	if (IsA(stmt, AlterSystemStmt))
		sslr_in_alter_system = true;
	return saved;
}

void
sslr_alter_system_leave(bool saved)
{
	sslr_in_alter_system = saved;
}

/*
 * Does this check see both limits as they will meet?  In a SET, and in
 * ALTER SYSTEM.  Not in a parallel worker taking its leader's values one by
 * one, in an order of PostgreSQL's, nor for ALTER ROLE/DATABASE (tested as
 * PGC_S_TEST against this session, not against the role's other values).
 */
static bool
sslr_check_sees_both(GucSource source)
{
	if (InitializingParallelWorker)
		return false;
	return source == PGC_S_SESSION || sslr_in_alter_system;
}

/*
 * The other limit, in kB, as the check should see it: in a SET, what this
 * session has in force; in ALTER SYSTEM, what the files will say at the
 * next reload -- postgresql.auto.conf's line, else what the files say now
 * (this session's reset value).
 */
static double
sslr_other_limit_kb(const char *name, double in_force_kb)
{
	ConfigVariable *head = NULL;
	ConfigVariable *tail = NULL;
	double		kb = in_force_kb;

	if (!sslr_in_alter_system)
		return kb;
	if (!parse_real(GetConfigOptionResetString(name), &kb, GUC_UNIT_KB, NULL))
		kb = in_force_kb;
	if (ParseConfigFile(PG_AUTOCONF_FILENAME, false, NULL, 0, 0, LOG,
						&head, &tail))
	{
		for (ConfigVariable *item = head; item != NULL; item = item->next)
		{
			double		value;

			if (strcmp(item->name, name) == 0 &&
				parse_real(item->value, &value, GUC_UNIT_KB, NULL))
				kb = value;
		}
	}
	FreeConfigVariables(head);
	return kb;
}

static const char *
sslr_where_checked(void)
{
	return sslr_in_alter_system ? "in the configuration files" : "in this session";
}

static bool
sslr_keep_source(void **extra, GucSource source)
{
	SslrSettingExtra *e = sslr_guc_malloc(sizeof(SslrSettingExtra));

	if (e == NULL)
		return false;
	e->source = source;
	*extra = e;
	return true;
}

static GucSource
sslr_source_of(void *extra)
{
	return extra ? ((SslrSettingExtra *) extra)->source : PGC_S_DEFAULT;
}

/* 0, or at least min_kb: nothing typed may round to "off". */
static bool
sslr_check_size_floor(const char *name, double kb, double min_kb,
					  const char *what)
{
	if (kb == 0 || kb >= min_kb)
		return true;
	GUC_check_errmsg("ssl_renegotiate.%s cannot be %s: the smallest value other than 0 is %s",
					 name, sslr_format_bytes((int64) llround(kb * 1024)),
					 sslr_format_bytes((int64) min_kb * 1024));
	GUC_check_errdetail("%s", what);
	GUC_check_errhint("0 turns it off.");
	return false;
}

static bool
sslr_check_byte_limit(double *newval, void **extra, GucSource source)
{
	int64		bytes = (int64) llround(*newval * 1024);
	int64		hard;

	if (!sslr_check_size_floor("byte_limit", *newval, SSLR_BYTE_LIMIT_KB_MIN,
							   "Rounded to its unit, it would turn byte-based rotation off."))
		return false;
	if (!sslr_check_sees_both(source))
		return sslr_keep_source(extra, source);
	hard = (int64) llround(sslr_other_limit_kb("ssl_renegotiate.hard_limit",
											   sslr_hard_limit_kb) * 1024);
	if (hard > 0 && hard < bytes + SSLR_HARD_LIMIT_MARGIN_BYTES)
	{
		GUC_check_errmsg("ssl_renegotiate.byte_limit must be at most %s here",
						 sslr_format_bytes(hard - SSLR_HARD_LIMIT_MARGIN_BYTES));
		GUC_check_errdetail("ssl_renegotiate.hard_limit is %s %s, and must stay %s above the byte limit, for the client's lag in answering a key update.",
							sslr_format_bytes(hard), sslr_where_checked(),
							sslr_format_bytes(SSLR_HARD_LIMIT_MARGIN_BYTES));
		GUC_check_errhint("To raise both limits, set hard_limit first; to lower both, byte_limit first.");
		return false;
	}
	return sslr_keep_source(extra, source);
}

static bool
sslr_check_hard_limit(double *newval, void **extra, GucSource source)
{
	int64		hard = (int64) llround(*newval * 1024);
	int64		byte_limit;

	if (!sslr_check_size_floor("hard_limit", *newval, SSLR_HARD_LIMIT_KB_MIN,
							   "A hard limit leaves that much room above the byte limit for the client's lag in answering a key update; no handshake comes near it."))
		return false;
	if (!sslr_check_sees_both(source) || hard == 0)
		return sslr_keep_source(extra, source);
	byte_limit = sslr_byte_limit_bytes();
	if (sslr_in_alter_system && !sslr_old_limit_in_force())
		byte_limit = (int64) llround(sslr_other_limit_kb("ssl_renegotiate.byte_limit",
														 sslr_byte_limit_kb) * 1024);
	if (hard < byte_limit + SSLR_HARD_LIMIT_MARGIN_BYTES)
	{
		GUC_check_errmsg("ssl_renegotiate.hard_limit must be 0 or at least %s here",
						 sslr_format_bytes(byte_limit + SSLR_HARD_LIMIT_MARGIN_BYTES));
		GUC_check_errdetail("ssl_renegotiate.byte_limit is %s %s, and a hard limit must stay %s above it, for the client's lag in answering a key update.",
							sslr_format_bytes(byte_limit), sslr_where_checked(),
							sslr_format_bytes(SSLR_HARD_LIMIT_MARGIN_BYTES));
		GUC_check_errhint("0 turns hard_limit off. To raise both limits, set hard_limit first; to lower both, byte_limit first.");
		return false;
	}
	return sslr_keep_source(extra, source);
}

static bool
sslr_check_interval(double *newval, void **extra pg_attribute_unused(),
					GucSource source pg_attribute_unused())
{
	if (*newval == 0 || *newval >= SSLR_INTERVAL_S_MIN)
		return true;
	GUC_check_errmsg("ssl_renegotiate.interval cannot be %gms: the smallest value other than 0 is 1s",
					 *newval * 1000);
	GUC_check_errdetail("Rounded to its unit, it would turn time-based rotation off.");
	GUC_check_errhint("0 turns it off.");
	return false;
}

/*
 * The floor of min_rekey_gap: refused below it, with the reason; tests
 * that need the old pace use debug_min_rekey_gap.
 */
static bool
sslr_check_min_rekey_gap(int *newval, void **extra pg_attribute_unused(),
						 GucSource source pg_attribute_unused())
{
	if (*newval >= SSLR_MIN_REKEY_GAP_MS_FLOOR)
		return true;
	GUC_check_errmsg("ssl_renegotiate.min_rekey_gap cannot be %dms: the smallest value is %dms",
					 *newval, SSLR_MIN_REKEY_GAP_MS_FLOOR);
	GUC_check_errdetail("GnuTLS clients end a connection at the 9th key update within a second, and OpenSSL is to refuse key updates less than 100ms apart; rotating faster than about once a second adds no safety.");
	GUC_check_errhint("ssl_renegotiate.byte_limit still asks for a new key after that many bytes: the gap only delays it.");
	return false;
}

/*
 * The old name: from the files only (ALTER SYSTEM is refused, so that no
 * new configuration uses it).  The postmaster says what it does at each
 * load that reads it, once for the whole server.
 */
static bool
sslr_check_old_limit(double *newval, void **extra pg_attribute_unused(),
					 GucSource source)
{
	if (source == PGC_S_DEFAULT)
		return true;
	if (sslr_in_alter_system)
	{
		GUC_check_errmsg("ssl_renegotiate.limit is the old name of ssl_renegotiate.byte_limit");
		GUC_check_errhint("Use ALTER SYSTEM SET ssl_renegotiate.byte_limit; ALTER SYSTEM RESET ssl_renegotiate.\"limit\" removes the old name.");
		return false;
	}
	if (!sslr_check_size_floor("limit", *newval, SSLR_BYTE_LIMIT_KB_MIN,
							   "Rounded to its unit, it would turn byte-based rotation off."))
		return false;
	if (IsUnderPostmaster)
		return true;
	if (sslr_byte_limit_source != PGC_S_DEFAULT)
		ereport(WARNING,
				(errcode(ERRCODE_WARNING_DEPRECATED_FEATURE),
				 errmsg("ssl_renegotiate.limit is ignored: ssl_renegotiate.byte_limit is set too, and wins"),
				 errdetail("ssl_renegotiate.limit is the name ssl_renegotiate.byte_limit had before version 1.1; it is read until version 2.0."),
				 errhint("Remove ssl_renegotiate.limit from postgresql.conf, or run ALTER SYSTEM RESET ssl_renegotiate.\"limit\" if it is in postgresql.auto.conf.")));
	else
		ereport(WARNING,
				(errcode(ERRCODE_WARNING_DEPRECATED_FEATURE),
				 errmsg("ssl_renegotiate.limit sets ssl_renegotiate.byte_limit to %s",
						sslr_format_bytes((int64) llround(*newval * 1024))),
				 errdetail("ssl_renegotiate.limit is the name ssl_renegotiate.byte_limit had before version 1.1; it is read until version 2.0."),
				 errhint("Rename it to ssl_renegotiate.byte_limit in postgresql.conf, or run ALTER SYSTEM SET ssl_renegotiate.byte_limit and ALTER SYSTEM RESET ssl_renegotiate.\"limit\".")));
	return true;
}

/* Assign hooks: flags and the value's level only. */
static void
sslr_assign_byte_limit(double newval pg_attribute_unused(), void *extra)
{
	sslr_byte_limit_source = sslr_source_of(extra);
	sslr_policy_changed();
}

static void
sslr_assign_hard_limit(double newval pg_attribute_unused(), void *extra)
{
	sslr_hard_limit_source = sslr_source_of(extra);
	sslr_policy_changed();
}

static void
sslr_assign_limit_real(double newval pg_attribute_unused(),
					   void *extra pg_attribute_unused())
{
	sslr_policy_changed();
}

static void
sslr_assign_policy_setting(int newval pg_attribute_unused(),
						   void *extra pg_attribute_unused())
{
	sslr_policy_changed();
}

static void
sslr_assign_log_rekeys(bool newval pg_attribute_unused(),
					   void *extra pg_attribute_unused())
{
	sslr_policy_changed();
}

static void
sslr_define_limits(void)
{
	DefineCustomRealVariable("ssl_renegotiate.byte_limit",
							 "Rotates a TLS connection's keys when this much was sent, or received, under one key.",
							 "Each direction is counted on its own. 0 turns byte-based rotation off; cipher limits still apply. Other values start at 1kB.",
							 &sslr_byte_limit_kb,
							 SSLR_BYTE_LIMIT_KB_DEFAULT, 0, SSLR_LIMIT_KB_MAX,
							 PGC_SUSET,
							 GUC_UNIT_KB,
							 sslr_check_byte_limit, sslr_assign_byte_limit, NULL);

	/* after byte_limit, so that its check knows whether byte_limit is set */
	DefineCustomRealVariable("ssl_renegotiate.limit",
							 "The name of ssl_renegotiate.byte_limit before version 1.1, read from the configuration files until 2.0.",
							 "Sets byte_limit unless byte_limit itself is set.",
							 &sslr_old_limit_kb,
							 SSLR_OLD_LIMIT_UNSET, SSLR_OLD_LIMIT_UNSET, SSLR_LIMIT_KB_MAX,
							 PGC_SIGHUP,
							 GUC_UNIT_KB | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_NO_RESET_ALL,
							 sslr_check_old_limit, sslr_assign_limit_real, NULL);

	DefineCustomRealVariable("ssl_renegotiate.interval",
							 "Rotates a TLS connection's keys at its first I/O after they were used this long.",
							 "0 turns time-based rotation off. Other values start at 1s.",
							 &sslr_interval_s,
							 SSLR_INTERVAL_S_DEFAULT, 0, SSLR_INTERVAL_S_MAX,
							 PGC_SUSET,
							 GUC_UNIT_S,
							 sslr_check_interval, sslr_assign_limit_real, NULL);

	DefineCustomRealVariable("ssl_renegotiate.hard_limit",
							 "Ends a TLS connection when more than this was sent, or received, under one key.",
							 "Catches peers that do not rotate their keys when asked. 0 turns it off. Other values start at 64MB, and at byte_limit + 64MB.",
							 &sslr_hard_limit_kb,
							 SSLR_HARD_LIMIT_KB_DEFAULT, 0, SSLR_LIMIT_KB_MAX,
							 PGC_SUSET,
							 GUC_UNIT_KB,
							 sslr_check_hard_limit, sslr_assign_hard_limit, NULL);
}

void
sslr_settings_define(void)
{
	sslr_define_limits();

	DefineCustomEnumVariable("ssl_renegotiate.tls12",
							 "What a TLS 1.2 connection does when it reaches a rotation limit.",
							 "\"renegotiate\" starts a server-initiated renegotiation, \"warn\" logs once and goes on, \"terminate\" ends the connection.",
							 &sslr_tls12_policy,
							 SSLR_TLS12_DEFAULT,
							 sslr_tls12_options,
							 PGC_SUSET,
							 0,
							 NULL, sslr_assign_policy_setting, NULL);

	DefineCustomBoolVariable("ssl_renegotiate.log_rekeys",
							 "Logs each TLS key rotation.",
							 NULL,
							 &sslr_log_rekeys,
							 SSLR_LOG_REKEYS_DEFAULT,
							 PGC_SUSET,
							 0,
							 NULL, sslr_assign_log_rekeys, NULL);

	DefineCustomIntVariable("ssl_renegotiate.max_peer_key_updates",
							"Ends a TLS 1.3 connection whose client sends key updates unasked faster than this burst allows.",
							"A client may send this many at once, and one more for every 16 kB it sends and every second. 0 turns the bound off.",
							&sslr_max_peer_key_updates,
							SSLR_MAX_PEER_KEY_UPDATES_DEFAULT, 0, INT_MAX,
							PGC_SUSET,
							0,
							NULL, sslr_assign_policy_setting, NULL);

	DefineCustomIntVariable("ssl_renegotiate.min_rekey_gap",
							"Sets the least time between two rotations of a direction's TLS keys that the server starts.",
							"A rotation due sooner (by bytes, interval or request) waits for it; the cipher's record limit does not. At least 250ms.",
							&sslr_rekey_gap_ms,
							SSLR_MIN_REKEY_GAP_MS_DEFAULT, 0, SSLR_MIN_REKEY_GAP_MS_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							sslr_check_min_rekey_gap, sslr_assign_policy_setting, NULL);

	DefineCustomIntVariable("ssl_renegotiate.debug_min_rekey_gap",
							"For tests only: overrides ssl_renegotiate.min_rekey_gap, down to 0.",
							"-1 uses ssl_renegotiate.min_rekey_gap.",
							&sslr_debug_rekey_gap_ms,
							SSLR_DEBUG_MIN_REKEY_GAP_UNSET, SSLR_DEBUG_MIN_REKEY_GAP_UNSET,
							SSLR_MIN_REKEY_GAP_MS_MAX,
							PGC_SUSET,
							GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
							NULL, sslr_assign_policy_setting, NULL);

	DefineCustomIntVariable("ssl_renegotiate.max_database_role_totals",
							"Sets the number of (database, role) pairs whose TLS totals are kept.",
							"When a new pair finds the table full, the pair with the fewest bytes is evicted.",
							&sslr_max_database_role_totals,
							SSLR_MAX_DATABASE_ROLE_TOTALS_DEFAULT, 1, INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("ssl_renegotiate");
}

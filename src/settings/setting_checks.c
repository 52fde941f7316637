/*-------------------------------------------------------------------------
 *
 * setting_checks.c
 *	  Defining the ssl_renegotiate.* settings, and refusing values that
 *	  would switch protection off by accident.
 *
 * Three rules, docs/settings.md:
 *	- No silent off.  byte_limit, hard_limit and interval are integer
 *	  settings (settings.h), and PostgreSQL rounds a value to the unit
 *	  before a check sees it: '100B' arrives as 0 kB, "off".  So a value
 *	  other than 0 below the smallest one is refused from the text typed:
 *	  our ProcessUtility hook reads it in SET, ALTER SYSTEM, ALTER
 *	  ROLE/DATABASE ... SET and a function's SET clause before they run;
 *	  a check that sees 0 from a file reads the file's line
 *	  (setting_files.c).  A refused file value keeps the old one, with
 *	  PostgreSQL's LOG line; at start-up the default, with a WARNING, and
 *	  ssl_renegotiate.refused_settings counts the line.
 *	- One setting, one check.  No check looks at another setting: a check
 *	  never sees the pair that will meet in a session (SET LOCAL, RESET,
 *	  function SET clauses, ALTER ROLE/DATABASE, the files).  key_limits.c's
 *	  safe rule fits hard_limit to byte_limit in force, and says so; each
 *	  value's level travels in its "extra", for that line.
 *	- The old name.  ssl_renegotiate.limit (1.0) is read from the files
 *	  only and sets byte_limit itself, as a line of the files, unless the
 *	  files set byte_limit too: SHOW, pg_settings (with its file and line)
 *	  and the activity view all show the value in force.  The postmaster
 *	  warns at each load that reads it, naming the file and line.
 *
 * Check hooks only decide; assign hooks only set flags (policy.c,
 * key_limits.c), but for the old name's, which sets byte_limit.  The one
 * ereport from a hook is the postmaster's WARNING about the old name, from
 * a check hook, as PostgreSQL's own checks do.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include <math.h>

#include "compat.h"
#include "rotation/key_limits.h"
#include "rotation/policy.h"
#include "settings/setting_checks.h"
#include "settings/setting_files.h"
#include "settings/settings.h"
#include "stats/role_totals.h"

/* What a value's "extra" carries: the level it came from. */
typedef struct SslrSettingExtra
{
	GucSource	source;
} SslrSettingExtra;

/* The old name's "extra": does it set byte_limit, and from which line. */
typedef struct SslrOldLimitExtra
{
	bool		sets_byte_limit;
	int			line;
	char		file[FLEXIBLE_ARRAY_MEMBER];
} SslrOldLimitExtra;

/* What the checks of a limit need to know of it. */
typedef struct SslrLimit
{
	const char *name;
	int			unit;			/* GUC_UNIT_KB, GUC_UNIT_S or GUC_UNIT_MS */
	int			min;			/* smallest value (other than 0), in the unit */
	int			max;
	bool		zero_is_off;	/* 0 turns it off, else min is the least */
	const char *boot;			/* its default, for the start-up hint */
	const char *detail;			/* why that smallest value */
	const char *hint;			/* what to do instead */
	const char *example;		/* a value, for the hint to a word */
} SslrLimit;

#define SSLR_ROUNDED_OFF_BYTES "Rounded to its unit, it would turn byte-based rotation off."

static const SslrLimit sslr_byte_limit_def = {
	"ssl_renegotiate.byte_limit", GUC_UNIT_KB, SSLR_BYTE_LIMIT_KB_MIN,
	SSLR_LIMIT_KB_MAX, true, "512MB", SSLR_ROUNDED_OFF_BYTES,
	"0 turns it off.", "a size, such as 512MB"
};
static const SslrLimit sslr_old_limit_def = {
	"ssl_renegotiate.limit", GUC_UNIT_KB, SSLR_BYTE_LIMIT_KB_MIN,
	SSLR_LIMIT_KB_MAX, true, "unset", SSLR_ROUNDED_OFF_BYTES,
	"0 turns it off.", "a size, such as 512MB"
};
static const SslrLimit sslr_interval_def = {
	"ssl_renegotiate.interval", GUC_UNIT_S, SSLR_INTERVAL_S_MIN,
	SSLR_INTERVAL_S_MAX, true, "0, off",
	"Rounded to its unit, it would turn time-based rotation off.",
	"0 turns it off.", "a time, such as 30min"
};
static const SslrLimit sslr_hard_limit_def = {
	"ssl_renegotiate.hard_limit", GUC_UNIT_KB, SSLR_HARD_LIMIT_KB_MIN,
	SSLR_LIMIT_KB_MAX, true, "0, off",
	"A hard limit leaves that much room above the byte limit for the client's lag in answering a key update; no handshake comes near it.",
	"0 turns it off.", "a size, such as 1GB"
};
static const SslrLimit sslr_min_rekey_gap_def = {
	"ssl_renegotiate.min_rekey_gap", GUC_UNIT_MS, SSLR_MIN_REKEY_GAP_MS_FLOOR,
	SSLR_MIN_REKEY_GAP_MS_MAX, false, "1s",
	"GnuTLS clients end a connection at the 9th key update within a second, and OpenSSL is to refuse key updates less than 100ms apart; rotating faster than about once a second adds no safety.",
	"ssl_renegotiate.byte_limit still asks for a new key after that many bytes: the gap only delays it.",
	"a time, such as 1s"
};

/* the settings whose typed text is checked before a statement runs */
static const SslrLimit *const sslr_typed_limits[] = {
	&sslr_byte_limit_def, &sslr_interval_def, &sslr_hard_limit_def,
	&sslr_min_rekey_gap_def
};

static const struct config_enum_entry sslr_tls12_options[] = {
	{"renegotiate", SSLR_TLS12_RENEGOTIATE, false},
	{"warn", SSLR_TLS12_WARN, false},
	{"terminate", SSLR_TLS12_TERMINATE, false},
	{NULL, 0, false}
};

static bool sslr_in_alter_system = false;

/* In _PG_init, defining the settings: a refused value leaves the default. */
static bool sslr_defining = false;

/* ssl_renegotiate.refused_settings: its value is its show hook's */
static int	sslr_refused_settings = 0;

/* A value in the limit's unit (a real, as typed), as a DBA types it. */
static char *
sslr_format_value(const SslrLimit *limit, double value)
{
	if (limit->unit == GUC_UNIT_S || limit->unit == GUC_UNIT_MS)
	{
		double		ms = limit->unit == GUC_UNIT_S ? value * 1000 : value;

		if (ms != rint(ms))
			return psprintf("%gms", ms);
		return sslr_key_limits_format_ms((int64) ms);
	}
	return sslr_key_limits_format_bytes((int64) llround(value * 1024));
}

/* Below the smallest value: 0 is off where it is, nothing else may be. */
static bool
sslr_below_floor(const SslrLimit *limit, double value)
{
	if (value == 0 && limit->zero_is_off)
		return false;
	return value < limit->min;
}

static char *
sslr_floor_message(const SslrLimit *limit, double value)
{
	return psprintf(limit->zero_is_off ?
					"%s cannot be %s: the smallest value other than 0 is %s" :
					"%s cannot be %s: the smallest value is %s",
					limit->name, sslr_format_value(limit, value),
					sslr_format_value(limit, limit->min));
}

/*
 * The text a statement gives one of the limits, checked before the
 * statement runs: PostgreSQL would round '100B' to 0 before any check saw
 * it.  A word ('off') gets a hint, where PostgreSQL says "invalid value"
 * only.  For those who may set it; others get PostgreSQL's own refusal.
 */
static void
sslr_check_typed(VariableSetStmt *stmt)
{
	const SslrLimit *limit = NULL;
	char	   *typed;
	double		value;
	bool		word;

	if (stmt == NULL || stmt->kind != VAR_SET_VALUE || stmt->name == NULL)
		return;
	for (int i = 0; i < (int) lengthof(sslr_typed_limits); i++)
	{
		if (pg_strcasecmp(stmt->name, sslr_typed_limits[i]->name) == 0)
			limit = sslr_typed_limits[i];
	}
	if (limit == NULL)
		return;
	if (!superuser() &&
		pg_parameter_aclcheck(limit->name, GetUserId(),
							  ACL_SET | ACL_ALTER_SYSTEM) != ACLCHECK_OK)
		return;
	typed = ExtractSetVariableArgs(stmt);
	if (typed == NULL)
		return;
	if (parse_real(typed, &value, limit->unit, NULL))
	{
		if (sslr_below_floor(limit, value))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg_internal("%s", sslr_floor_message(limit, value)),
					 value > 0 ? errdetail_internal("%s", limit->detail) : 0,
					 errhint("%s", limit->hint)));
		if (value > limit->max)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s cannot be %s: the largest value is %s",
							limit->name, sslr_format_value(limit, value),
							sslr_format_value(limit, limit->max))));
	}
	else if (parse_bool(typed, &word))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"%s\": \"%s\"",
						limit->name, typed),
				 errhint("%s takes %s; 0 turns it off.", limit->name,
						 limit->example)));
}

/* CREATE FUNCTION's options, ALTER FUNCTION's actions: SET clauses */
static void
sslr_check_typed_clauses(List *clauses)
{
	ListCell   *lc;

	foreach(lc, clauses)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (IsA(def, DefElem) && strcmp(def->defname, "set") == 0 &&
			def->arg != NULL && IsA(def->arg, VariableSetStmt))
			sslr_check_typed((VariableSetStmt *) def->arg);
	}
}

static void
sslr_check_statement(Node *stmt)
{
	switch (nodeTag(stmt))
	{
		case T_VariableSetStmt:
			sslr_check_typed((VariableSetStmt *) stmt);
			break;
		case T_AlterSystemStmt:
			sslr_check_typed(((AlterSystemStmt *) stmt)->setstmt);
			break;
		case T_AlterRoleSetStmt:
			sslr_check_typed(((AlterRoleSetStmt *) stmt)->setstmt);
			break;
		case T_AlterDatabaseSetStmt:
			sslr_check_typed(((AlterDatabaseSetStmt *) stmt)->setstmt);
			break;
		case T_CreateFunctionStmt:
			sslr_check_typed_clauses(((CreateFunctionStmt *) stmt)->options);
			break;
		case T_AlterFunctionStmt:
			sslr_check_typed_clauses(((AlterFunctionStmt *) stmt)->actions);
			break;
		default:
			break;
	}
}

/*
 * Around a utility statement (ssl_renegotiate.c's ProcessUtility_hook):
 * before it, the text it gives our limits is checked; and ALTER SYSTEM,
 * which checks a value as if from a file (PGC_S_FILE), is told from a file
 * being read.  Returns what sslr_settings_utility_leave restores after the
 * statement, even after an error.
 */
bool
sslr_settings_utility_enter(Node *stmt)
{
	bool		saved = sslr_in_alter_system;

	sslr_check_statement(stmt);
	if (IsA(stmt, AlterSystemStmt))
		sslr_in_alter_system = true;
	return saved;
}

void
sslr_settings_utility_leave(bool saved)
{
	sslr_in_alter_system = saved;
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

/*
 * 0, or at least the smallest value.  A 0 from a file is looked up as
 * typed, in case PostgreSQL rounded it so (not in ALTER SYSTEM, whose text
 * our hook checked, nor in a parallel worker, which takes its leader's).
 */
static bool
sslr_check_floor(const SslrLimit *limit, int newval, GucSource source)
{
	double		value = newval;

	if (newval == 0 && source == PGC_S_FILE && !sslr_in_alter_system &&
		!InitializingParallelWorker)
	{
		SslrFileLine line;
		double		typed;

		if (sslr_setting_files_line(limit->name, &line) &&
			parse_real(line.value, &typed, limit->unit, NULL))
			value = typed;
	}
	if (!sslr_below_floor(limit, value))
		return true;
	GUC_check_errmsg("%s", sslr_floor_message(limit, value));
	GUC_check_errdetail("%s", limit->detail);
	if (sslr_defining)
		GUC_check_errhint("%s Until the value is mended, %s keeps its default (%s).",
						  limit->hint, limit->name, limit->boot);
	else
		GUC_check_errhint("%s", limit->hint);
	return false;
}

static bool
sslr_check_byte_limit(int *newval, void **extra, GucSource source)
{
	if (!sslr_check_floor(&sslr_byte_limit_def, *newval, source))
		return false;
	return sslr_keep_source(extra, source);
}

static bool
sslr_check_hard_limit(int *newval, void **extra, GucSource source)
{
	if (!sslr_check_floor(&sslr_hard_limit_def, *newval, source))
		return false;
	return sslr_keep_source(extra, source);
}

static bool
sslr_check_interval(int *newval, void **extra pg_attribute_unused(),
					GucSource source)
{
	return sslr_check_floor(&sslr_interval_def, *newval, source);
}

/* "FILE, line N", or the files as a whole when the line is not found */
static char *
sslr_where(const SslrFileLine *line, bool found)
{
	if (found)
		return psprintf("%s, line %d", line->file, line->line);
	return pstrdup("the configuration files");
}

/* The postmaster's WARNING at each load that reads the old name. */
static void
sslr_warn_old_limit(int kb, bool sets, const SslrFileLine *own, bool own_found,
					const SslrFileLine *byte_limit, bool byte_limit_found)
{
	char	   *where = sslr_where(own, own_found);
	bool		in_auto = own_found &&
		strstr(own->file, PG_AUTOCONF_FILENAME) != NULL;

	if (sets)
		ereport(WARNING,
				(errcode(ERRCODE_WARNING_DEPRECATED_FEATURE),
				 errmsg("ssl_renegotiate.limit sets ssl_renegotiate.byte_limit to %s",
						sslr_key_limits_format_bytes((int64) kb * 1024)),
				 errdetail("ssl_renegotiate.limit (%s) is the name ssl_renegotiate.byte_limit had before version 1.1; it is read until version 2.0.",
						   where),
				 in_auto ?
				 errhint("Run ALTER SYSTEM SET ssl_renegotiate.byte_limit = '%s' and ALTER SYSTEM RESET ssl_renegotiate.\"limit\".",
						 sslr_key_limits_format_bytes((int64) kb * 1024)) :
				 errhint("Rename it to ssl_renegotiate.byte_limit in %s.", where)));
	else
		ereport(WARNING,
				(errcode(ERRCODE_WARNING_DEPRECATED_FEATURE),
				 errmsg("ssl_renegotiate.limit is ignored: ssl_renegotiate.byte_limit is set too, and wins"),
				 errdetail("ssl_renegotiate.limit (%s) is the name ssl_renegotiate.byte_limit had before version 1.1; it is read until version 2.0. ssl_renegotiate.byte_limit is set in %s.",
						   where, byte_limit_found ?
						   sslr_where(byte_limit, true) : "the server's command line"),
				 in_auto ?
				 errhint("Run ALTER SYSTEM RESET ssl_renegotiate.\"limit\".") :
				 errhint("Remove ssl_renegotiate.limit from %s.", where)));
}

/*
 * The old name: from the files only (ALTER SYSTEM is refused, so that no
 * new configuration uses it).  It sets byte_limit unless the files set
 * byte_limit too, or a level above them (the server's command line) does.
 */
static bool
sslr_check_old_limit(int *newval, void **extra, GucSource source)
{
	SslrOldLimitExtra *e;
	SslrFileLine own;
	SslrFileLine byte_limit;
	bool		own_found;
	bool		byte_limit_found;
	bool		sets;
	size_t		file_size;

	if (source == PGC_S_DEFAULT || *newval < 0)
		return true;
	if (sslr_in_alter_system)
	{
		GUC_check_errmsg("ssl_renegotiate.limit is the old name of ssl_renegotiate.byte_limit");
		GUC_check_errhint("Use ALTER SYSTEM SET ssl_renegotiate.byte_limit; ALTER SYSTEM RESET ssl_renegotiate.\"limit\" removes the old name.");
		return false;
	}
	if (!sslr_check_floor(&sslr_old_limit_def, *newval, source))
		return false;
	if (InitializingParallelWorker)
		return true;			/* byte_limit comes from the leader */
	own_found = sslr_setting_files_line("ssl_renegotiate.limit", &own);
	byte_limit_found = sslr_setting_files_line("ssl_renegotiate.byte_limit", &byte_limit);
	sets = !byte_limit_found &&
		sslr_setting_files_reset_source("ssl_renegotiate.byte_limit") <= PGC_S_FILE;
	file_size = (own_found ? strlen(own.file) : 0) + 1;
	e = sslr_guc_malloc(offsetof(SslrOldLimitExtra, file) + file_size);
	if (e == NULL)
		return false;
	e->sets_byte_limit = sets;
	e->line = own_found ? own.line : 0;
	strlcpy(e->file, own_found ? own.file : "", file_size);
	*extra = e;
	if (!IsUnderPostmaster)
		sslr_warn_old_limit(*newval, sets, &own, own_found,
							&byte_limit, byte_limit_found);
	return true;
}

/* Assign hooks: flags and the value's level only, but for the old name. */
static void
sslr_assign_byte_limit(int newval pg_attribute_unused(), void *extra)
{
	sslr_byte_limit_source = sslr_source_of(extra);
	sslr_policy_changed();
}

static void
sslr_assign_hard_limit(int newval pg_attribute_unused(), void *extra)
{
	sslr_hard_limit_source = sslr_source_of(extra);
	sslr_policy_changed();
}

/*
 * The old name sets byte_limit itself, as a line of the files would: SHOW
 * and pg_settings show it with the old name's file and line, a SET or
 * ALTER ROLE/DATABASE SET of byte_limit wins over it as over any file
 * line, and when the old name leaves the files PostgreSQL puts byte_limit
 * back to its default at that reload.  Errors are only logged (a level of
 * the files), none is raised here.
 */
static void
sslr_assign_old_limit(int newval, void *extra)
{
	SslrOldLimitExtra *e = (SslrOldLimitExtra *) extra;
	char		value[32];

	if (newval < 0 || e == NULL || !e->sets_byte_limit)
		return;
	snprintf(value, sizeof(value), "%dkB", newval);
	SetConfigOption("ssl_renegotiate.byte_limit", value, PGC_SIGHUP, PGC_S_FILE);
	if (e->file[0] != '\0')
		sslr_setting_files_set_sourcefile("ssl_renegotiate.byte_limit", e->file, e->line);
}

static void
sslr_assign_interval(int newval pg_attribute_unused(),
					 void *extra pg_attribute_unused())
{
	sslr_policy_changed();
}

/* ssl_renegotiate.refused_settings, counted when read */
static const char *
sslr_show_refused_settings(void)
{
	static char buf[16];

	snprintf(buf, sizeof(buf), "%d", sslr_refused_file_lines());
	return buf;
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
	DefineCustomIntVariable("ssl_renegotiate.byte_limit",
							"Rotates a TLS connection's keys when this much was sent, or received, under one key.",
							"Each direction is counted on its own. 0 turns byte-based rotation off; cipher limits still apply. Other values start at 1kB.",
							&sslr_byte_limit_kb,
							SSLR_BYTE_LIMIT_KB_DEFAULT, 0, SSLR_LIMIT_KB_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							sslr_check_byte_limit, sslr_assign_byte_limit, NULL);

	/* after byte_limit, which its assign hook sets */
	DefineCustomIntVariable("ssl_renegotiate.limit",
							"The name of ssl_renegotiate.byte_limit before version 1.1, read from the configuration files until 2.0.",
							"Sets byte_limit unless the configuration files set byte_limit too.",
							&sslr_old_limit_kb,
							SSLR_OLD_LIMIT_UNSET, SSLR_OLD_LIMIT_UNSET, SSLR_LIMIT_KB_MAX,
							PGC_SIGHUP,
							GUC_UNIT_KB | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_NO_RESET_ALL,
							sslr_check_old_limit, sslr_assign_old_limit, NULL);

	DefineCustomIntVariable("ssl_renegotiate.interval",
							"Rotates a TLS connection's keys at its first I/O after they were used this long.",
							"0 turns time-based rotation off. Other values start at 1s.",
							&sslr_interval_s,
							SSLR_INTERVAL_S_DEFAULT, 0, SSLR_INTERVAL_S_MAX,
							PGC_SUSET,
							GUC_UNIT_S,
							sslr_check_interval, sslr_assign_interval, NULL);

	DefineCustomIntVariable("ssl_renegotiate.hard_limit",
							"Ends a TLS connection when more than this was sent, or received, under one key.",
							"Catches peers that do not rotate their keys when asked. 0 turns it off. Other values start at 64MB; in force it is at least byte_limit + 64MB.",
							&sslr_hard_limit_kb,
							SSLR_HARD_LIMIT_KB_DEFAULT, 0, SSLR_LIMIT_KB_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							sslr_check_hard_limit, sslr_assign_hard_limit, NULL);
}

void
sslr_settings_define(void)
{
	sslr_defining = true;
	sslr_define_limits();
	sslr_defining = false;

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
							SSLR_MIN_REKEY_GAP_MS_DEFAULT, SSLR_MIN_REKEY_GAP_MS_FLOOR,
							SSLR_MIN_REKEY_GAP_MS_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, sslr_assign_policy_setting, NULL);

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

	DefineCustomIntVariable("ssl_renegotiate.refused_settings",
							"Shows how many lines of ssl_renegotiate settings in the configuration files are not in force: their values were refused.",
							"Such a setting keeps its value from before the reload, or its default from start-up; the server log and pg_file_settings say why.",
							&sslr_refused_settings,
							0, 0, INT_MAX,
							PGC_INTERNAL,
							GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE | GUC_SUPERUSER_ONLY,
							NULL, NULL, sslr_show_refused_settings);

	MarkGUCPrefixReserved("ssl_renegotiate");
}

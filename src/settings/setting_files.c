/*-------------------------------------------------------------------------
 *
 * setting_files.c
 *	  What the configuration files say about the ssl_renegotiate.*
 *	  settings, and where PostgreSQL keeps a setting's origin.
 *
 * The files are read here as PostgreSQL reads them (postgresql.conf with
 * what it includes, then postgresql.auto.conf; the last line of a name
 * wins), for three things PostgreSQL does not hand a check hook:
 *	- the text a value of the files was typed as: PostgreSQL rounds an
 *	  integer setting to its unit first, so '100B' reaches the check as 0;
 *	- the file and line of the 1.0 name, for its WARNING, and whether
 *	  byte_limit has a line of its own;
 *	- which lines are refused, for ssl_renegotiate.refused_settings: each
 *	  line is checked as a reload checks it, without applying it (as
 *	  pg_file_settings does), so a line refused at start-up or at the
 *	  last reload counts until it is mended or removed.
 * Each read works in a memory context of its own, freed before it returns.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "compat.h"
#include "settings/setting_files.h"

#define SSLR_PREFIX "ssl_renegotiate."

/* The files' lines, in the order PostgreSQL applies them. */
static ConfigVariable *
sslr_read_files(void)
{
	ConfigVariable *head = NULL;
	ConfigVariable *tail = NULL;

	/* PostgreSQL has reported any error in them already */
	if (ConfigFileName != NULL)
		(void) ParseConfigFile(ConfigFileName, true, NULL, 0, 0, DEBUG2,
							   &head, &tail);
	if (DataDir != NULL)
		(void) ParseConfigFile(PG_AUTOCONF_FILENAME, false, NULL, 0, 0, DEBUG2,
							   &head, &tail);
	return head;
}

static MemoryContext
sslr_files_context(void)
{
	return AllocSetContextCreate(CurrentMemoryContext, "ssl_renegotiate files",
								 ALLOCSET_SMALL_SIZES);
}

bool
sslr_setting_files_line(const char *name, SslrFileLine *found)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt = sslr_files_context();
	ConfigVariable *last = NULL;

	MemoryContextSwitchTo(cxt);
	for (ConfigVariable *item = sslr_read_files(); item != NULL; item = item->next)
	{
		if (item->name != NULL && pg_strcasecmp(item->name, name) == 0)
			last = item;
	}
	MemoryContextSwitchTo(caller);
	if (last != NULL)
	{
		found->value = pstrdup(last->value);
		found->file = pstrdup(last->filename);
		found->line = last->sourceline;
	}
	MemoryContextDelete(cxt);
	return last != NULL;
}

GucSource
sslr_setting_files_reset_source(const char *name)
{
	struct config_generic *record = sslr_find_guc(name);

	return record ? record->reset_source : PGC_S_DEFAULT;
}

/*
 * What PostgreSQL does for a line it applied: pg_settings' sourcefile and
 * sourceline.  A failed copy leaves the origin unknown, as PostgreSQL does.
 */
void
sslr_setting_files_set_sourcefile(const char *name, const char *file, int line)
{
	struct config_generic *record = sslr_find_guc(name);
	char	   *copy;

	if (record == NULL)
		return;
	copy = sslr_guc_strdup(file);
	if (copy == NULL)
		return;
	if (record->sourcefile)
		sslr_guc_free(record->sourcefile);
	record->sourcefile = copy;
	record->sourceline = line;
}

/* Is item the last line of its name, the one PostgreSQL applies? */
static bool
sslr_last_of_name(const ConfigVariable *item)
{
	for (const ConfigVariable *later = item->next; later != NULL; later = later->next)
	{
		if (later->name != NULL && pg_strcasecmp(later->name, item->name) == 0)
			return false;
	}
	return true;
}

int
sslr_refused_file_lines(void)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext cxt = sslr_files_context();
	int			refused = 0;

	MemoryContextSwitchTo(cxt);
	for (ConfigVariable *item = sslr_read_files(); item != NULL; item = item->next)
	{
		struct config_generic *record;

		if (item->name == NULL ||
			pg_strncasecmp(item->name, SSLR_PREFIX, strlen(SSLR_PREFIX)) != 0 ||
			!sslr_last_of_name(item))
			continue;
		record = sslr_find_guc(item->name);
		/* a restart applies these: pg_settings.pending_restart says so */
		if (record != NULL && record->context == PGC_POSTMASTER)
			continue;
		/* checked as a reload checks it, changing nothing */
		if (record == NULL ||
			set_config_option(item->name, item->value, PGC_SIGHUP, PGC_S_FILE,
							  GUC_ACTION_SET, false, DEBUG3, false) == 0)
			refused++;
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(cxt);
	return refused;
}

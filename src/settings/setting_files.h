/*-------------------------------------------------------------------------
 *
 * setting_files.h
 *	  What the configuration files say about the ssl_renegotiate.*
 *	  settings, and where PostgreSQL keeps a setting's origin.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SETTING_FILES_H
#define SSLR_SETTING_FILES_H

#include "utils/guc.h"

/* The line of the configuration files that sets a setting; palloc'd. */
typedef struct SslrFileLine
{
	char	   *value;
	char	   *file;
	int			line;
} SslrFileLine;

/*
 * The line that sets name, the last one (which PostgreSQL applies), from
 * postgresql.conf and what it includes, then postgresql.auto.conf.
 */
extern bool sslr_setting_files_line(const char *name, SslrFileLine *found);

/* Where the value in force came from: PostgreSQL's own record of it. */
extern GucSource sslr_setting_files_reset_source(const char *name);
extern void sslr_setting_files_set_sourcefile(const char *name, const char *file,
											  int line);

/*
 * Lines of ssl_renegotiate.* in the configuration files that a reload
 * refuses (a value out of bounds, a name that is not a setting): none of
 * them is in force.
 */
extern int	sslr_refused_file_lines(void);

#endif							/* SSLR_SETTING_FILES_H */

/*-------------------------------------------------------------------------
 *
 * statsfile.c
 *	  The totals across a clean restart: format, checksum, writing at a
 *	  clean shutdown, reading at start.
 *
 * The postmaster writes the totals (totals.c) and the totals per database
 * and role (role_totals.c) to a file of ours under pg_stat/ when it exits
 * after a shutdown checkpoint, and reads and removes that file when it
 * creates shared memory, so that after a crash (or an immediate stop) they
 * start again from zero.  Only the postmaster
 * runs this file, when no backend is left or none has started yet: there
 * is nothing to lock.
 *
 * The file is the totals as they are in memory, with a magic number, a
 * format number and their size in front, then (since format 2) the
 * entries per database and role, and a CRC-32C of all of it behind; a
 * file that fails any check (a (database, role) held twice among them) is
 * ignored whole (and said so in the log).  A
 * format 1 file, of version 1.1, is still read.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog_internal.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "stats/role_totals.h"
#include "stats/statsfile.h"
#include "stats/totals.h"

#define SSLR_TOTALS_FILE	PGSTAT_STAT_PERMANENT_DIRECTORY "/ssl_renegotiate.stat"
#define SSLR_TOTALS_MAGIC	0x534c5352	/* "SSLR" */
#define SSLR_TOTALS_FORMAT	2

/*
 * Format 1 (version 1.1): the cluster totals alone, as in memory, then the
 * checksum.  Still read, never written.
 */
typedef struct SslrTotalsFileV1
{
	uint32		magic;
	uint32		format;
	uint32		size;			/* sizeof(SslrTotals) */
	SslrTotals	totals;
	pg_crc32c	crc;			/* of everything above */
} SslrTotalsFileV1;

/*
 * Format 2: the same beginning, then the totals per database and role:
 * this header, nentries entries (role_totals.c), and a CRC-32C of all of
 * it.
 */
typedef struct SslrTotalsFileHeader
{
	uint32		magic;
	uint32		format;
	uint32		size;			/* sizeof(SslrTotals) */
	uint32		entry_size;		/* sizeof(SslrRoleEntry) */
	SslrTotals	totals;
	SslrRoleInfo role_info;
	int64		nentries;
} SslrTotalsFileHeader;

/* The file as it is written: a stream whose checksum grows with it. */
typedef struct SslrFileWriter
{
	FILE	   *file;
	pg_crc32c	crc;
	bool		ok;
} SslrFileWriter;

static void
sslr_file_write(SslrFileWriter *w, const void *data, size_t len)
{
	COMP_CRC32C(w->crc, data, len);
	if (w->ok && fwrite(data, len, 1, w->file) != 1)
		w->ok = false;
}

static void
sslr_file_write_entry(const SslrRoleEntry *entry, void *arg)
{
	sslr_file_write((SslrFileWriter *) arg, entry, sizeof(*entry));
}

static pg_crc32c
sslr_crc_of(const void *data, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Did the cluster just shut down cleanly?  pg_control says so once the
 * shutdown checkpoint is written; after an immediate stop or a crash it
 * still says "in production".  Read by hand: nothing here may ERROR.
 */
static bool
sslr_shut_down_cleanly(void)
{
	ControlFileData control;
	pg_crc32c	crc;
	char		path[MAXPGPATH];
	int			fd;
	bool		read_all;

	snprintf(path, sizeof(path), "%s/%s", DataDir, XLOG_CONTROL_FILE);
	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
		return false;
	read_all = read(fd, &control, sizeof(control)) == sizeof(control);
	close(fd);
	if (!read_all)
		return false;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &control, offsetof(ControlFileData, crc));
	FIN_CRC32C(crc);
	return EQ_CRC32C(crc, control.crc) &&
		(control.state == DB_SHUTDOWNED || control.state == DB_SHUTDOWNED_IN_RECOVERY);
}

/*
 * At postmaster exit: keep the totals, and the totals per database and
 * role, if the cluster shut down cleanly.
 */
static void
sslr_statsfile_write(int code, Datum arg pg_attribute_unused())
{
	SslrTotalsFileHeader header;
	SslrFileWriter w;

	memset(&header, 0, sizeof(header));
	if (code != 0 || !sslr_shut_down_cleanly() || !sslr_totals_to_keep(&header.totals) ||
		!sslr_role_totals_to_keep(&header.role_info, &header.nentries))
		return;

	header.magic = SSLR_TOTALS_MAGIC;
	header.format = SSLR_TOTALS_FORMAT;
	header.size = sizeof(SslrTotals);
	header.entry_size = sizeof(SslrRoleEntry);

	w.file = AllocateFile(SSLR_TOTALS_FILE ".tmp", PG_BINARY_W);
	if (w.file == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SSLR_TOTALS_FILE ".tmp")));
		return;
	}
	w.ok = true;
	INIT_CRC32C(w.crc);
	sslr_file_write(&w, &header, sizeof(header));
	sslr_role_totals_foreach(sslr_file_write_entry, &w);
	FIN_CRC32C(w.crc);
	if (w.ok && fwrite(&w.crc, sizeof(w.crc), 1, w.file) != 1)
		w.ok = false;
	if (FreeFile(w.file) != 0 || !w.ok)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SSLR_TOTALS_FILE ".tmp")));
		unlink(SSLR_TOTALS_FILE ".tmp");
		return;
	}
	(void) durable_rename(SSLR_TOTALS_FILE ".tmp", SSLR_TOTALS_FILE, LOG);
}

/* qsort: by key */
static int
sslr_entry_key_cmp(const void *a, const void *b)
{
	const SslrRoleKey *ka = &((const SslrRoleEntry *) a)->key;
	const SslrRoleKey *kb = &((const SslrRoleEntry *) b)->key;

	if (ka->dbid != kb->dbid)
		return ka->dbid < kb->dbid ? -1 : 1;
	if (ka->userid != kb->userid)
		return ka->userid < kb->userid ? -1 : 1;
	return 0;
}

/*
 * A key held twice (entries sorted by key here), or NULL.  The table has
 * one entry per key, so such a file is not one written here: like one whose
 * checksum fails, it is ignored whole, as PostgreSQL's own statistics file
 * is when it holds an entry twice.  Summing would keep counts of unknown
 * origin, under a stats_reset that fits neither.
 */
static const char *
sslr_duplicate_key(SslrRoleEntry *entries, int64 nentries)
{
	static char problem[128];

	qsort(entries, nentries, sizeof(SslrRoleEntry), sslr_entry_key_cmp);
	for (int64 i = 1; i < nentries; i++)
		if (sslr_entry_key_cmp(&entries[i - 1], &entries[i]) == 0)
		{
			snprintf(problem, sizeof(problem),
					 "it holds database %u, role %u twice",
					 entries[i].key.dbid, entries[i].key.userid);
			return problem;
		}
	return NULL;
}

/*
 * Check a file's content, and restore what it holds; or say what is wrong
 * with it.  Format 1 holds the cluster totals only: the totals per
 * database and role then start empty.
 */
static const char *
sslr_statsfile_restore(const char *data, size_t len)
{
	SslrTotalsFileHeader header;
	SslrTotalsFileV1 v1;
	size_t		entries_len;
	pg_crc32c	crc;

	if (len < offsetof(SslrTotalsFileHeader, entry_size))
		return "it is not of the expected size";
	memcpy(&header, data, offsetof(SslrTotalsFileHeader, entry_size));
	if (header.magic != SSLR_TOTALS_MAGIC || header.size != sizeof(SslrTotals) ||
		(header.format != 1 && header.format != SSLR_TOTALS_FORMAT))
		return "it is of another format";

	if (header.format == 1)
	{
		if (len != sizeof(v1))
			return "it is not of the expected size";
		memcpy(&v1, data, sizeof(v1));
		if (!EQ_CRC32C(v1.crc, sslr_crc_of(&v1, offsetof(SslrTotalsFileV1, crc))))
			return "its checksum does not match";
		sslr_totals_restore(&v1.totals);
		return NULL;
	}

	if (len < sizeof(header) + sizeof(crc))
		return "it is not of the expected size";
	memcpy(&header, data, sizeof(header));
	if (header.entry_size != sizeof(SslrRoleEntry))
		return "it is of another format";
	entries_len = len - sizeof(header) - sizeof(crc);
	if (header.nentries < 0 || entries_len % sizeof(SslrRoleEntry) != 0 ||
		entries_len / sizeof(SslrRoleEntry) != (uint64) header.nentries)
		return "it is not of the expected size";
	memcpy(&crc, data + len - sizeof(crc), sizeof(crc));
	if (!EQ_CRC32C(crc, sslr_crc_of(data, len - sizeof(crc))))
		return "its checksum does not match";

	if (header.nentries > 0)
	{
		SslrRoleEntry *entries = palloc(entries_len);
		const char *problem;

		memcpy(entries, data + sizeof(header), entries_len);
		problem = sslr_duplicate_key(entries, header.nentries);
		if (problem == NULL)
		{
			sslr_totals_restore(&header.totals);
			sslr_role_totals_restore(&header.role_info, entries, header.nentries);
		}
		pfree(entries);
		return problem;
	}
	sslr_totals_restore(&header.totals);
	sslr_role_totals_restore(&header.role_info, NULL, 0);
	return NULL;
}

/*
 * When the postmaster creates shared memory: the totals saved at the last
 * clean shutdown, if any.  The file is removed once read, so that a crash
 * restart finds none.
 */
static void
sslr_statsfile_read(void)
{
	const char *problem = NULL;
	FILE	   *file = AllocateFile(SSLR_TOTALS_FILE, PG_BINARY_R);
	struct stat st;
	char	   *data = NULL;

	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", SSLR_TOTALS_FILE)));
		return;
	}
	if (fstat(fileno(file), &st) != 0 || (Size) st.st_size > MaxAllocSize)
		problem = "it is not of the expected size";
	else
	{
		data = palloc(Max(st.st_size, 1));
		if ((st.st_size > 0 && fread(data, st.st_size, 1, file) != 1) || fgetc(file) != EOF)
			problem = "it is not of the expected size";
		else
			problem = sslr_statsfile_restore(data, st.st_size);
		pfree(data);
	}
	FreeFile(file);

	if (problem)
		ereport(LOG,
				(errmsg("ssl_renegotiate: ignoring the totals saved in \"%s\": %s",
						SSLR_TOTALS_FILE, problem),
				 errdetail("The totals start again from zero.")));
	unlink(SSLR_TOTALS_FILE);
}

/*
 * After shared memory is made: in the postmaster, read the totals of the
 * last clean shutdown and arrange to write them at the next one.
 */
void
sslr_statsfile_startup(void)
{
	if (IsUnderPostmaster)
		return;
	sslr_statsfile_read();
	on_shmem_exit(sslr_statsfile_write, (Datum) 0);
}

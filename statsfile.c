/*-------------------------------------------------------------------------
 *
 * statsfile.c
 *	  The totals across a clean restart: format, checksum, writing at a
 *	  clean shutdown, reading at start.
 *
 * The postmaster writes the totals (totals.c) to a file of ours under
 * pg_stat/ when it exits after a shutdown checkpoint, and reads and
 * removes that file when it creates shared memory, so that after a crash
 * (or an immediate stop) they start again from zero.  Only the postmaster
 * runs this file, when no backend is left or none has started yet: there
 * is nothing to lock.
 *
 * The file is the totals as they are in memory, with a magic number, a
 * format number and their size in front and a CRC-32C of all of it
 * behind; a file that fails any check is ignored (and said so in the log).
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog_internal.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"

#include "statsfile.h"
#include "totals.h"

#define SSLR_TOTALS_FILE	PGSTAT_STAT_PERMANENT_DIRECTORY "/ssl_renegotiate.stat"
#define SSLR_TOTALS_MAGIC	0x534c5352	/* "SSLR" */
#define SSLR_TOTALS_FORMAT	1

typedef struct SslrTotalsFile
{
	uint32		magic;
	uint32		format;
	uint32		size;			/* sizeof(SslrTotals) */
	SslrTotals	totals;
	pg_crc32c	crc;			/* of everything above */
} SslrTotalsFile;

static pg_crc32c
sslr_totals_crc(const SslrTotalsFile *data)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, offsetof(SslrTotalsFile, crc));
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

/* At postmaster exit: keep the totals if the cluster shut down cleanly. */
static void
sslr_statsfile_write(int code, Datum arg pg_attribute_unused())
{
	SslrTotalsFile data;
	FILE	   *file;
	bool		written;

	memset(&data, 0, sizeof(data));
	if (code != 0 || !sslr_shut_down_cleanly() || !sslr_totals_to_keep(&data.totals))
		return;

	data.magic = SSLR_TOTALS_MAGIC;
	data.format = SSLR_TOTALS_FORMAT;
	data.size = sizeof(SslrTotals);
	data.crc = sslr_totals_crc(&data);

	file = AllocateFile(SSLR_TOTALS_FILE ".tmp", PG_BINARY_W);
	if (file == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SSLR_TOTALS_FILE ".tmp")));
		return;
	}
	written = fwrite(&data, sizeof(data), 1, file) == 1;
	if (FreeFile(file) != 0 || !written)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", SSLR_TOTALS_FILE ".tmp")));
		unlink(SSLR_TOTALS_FILE ".tmp");
		return;
	}
	(void) durable_rename(SSLR_TOTALS_FILE ".tmp", SSLR_TOTALS_FILE, LOG);
}

/*
 * When the postmaster creates shared memory: the totals saved at the last
 * clean shutdown, if any.  The file is removed once read, so that a crash
 * restart finds none.
 */
static void
sslr_statsfile_read(void)
{
	SslrTotalsFile data;
	const char *problem = NULL;
	FILE	   *file = AllocateFile(SSLR_TOTALS_FILE, PG_BINARY_R);

	if (file == NULL)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", SSLR_TOTALS_FILE)));
		return;
	}
	if (fread(&data, sizeof(data), 1, file) != 1 || fgetc(file) != EOF)
		problem = "it is not of the expected size";
	else if (data.magic != SSLR_TOTALS_MAGIC || data.format != SSLR_TOTALS_FORMAT ||
			 data.size != sizeof(SslrTotals))
		problem = "it is of another format";
	else if (!EQ_CRC32C(data.crc, sslr_totals_crc(&data)))
		problem = "its checksum does not match";
	FreeFile(file);

	if (problem)
		ereport(LOG,
				(errmsg("ssl_renegotiate: ignoring the totals saved in \"%s\": %s",
						SSLR_TOTALS_FILE, problem),
				 errdetail("The totals start again from zero.")));
	else
		sslr_totals_restore(&data.totals);
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

/*-------------------------------------------------------------------------
 *
 * preauth.c
 *	  A connection's counts before authentication, kept out of sight of
 *	  other roles until the connection authenticates or ends.
 *
 * Before authentication a backend may have no PGPROC (so no LWLock), and
 * it may leave by _exit() (startup packet timeout, SIGTERM during
 * start-up), which runs no exit callback: its counts must be in shared
 * memory from its first record on.  But a sum everyone reads, added to
 * record by record, shows any role the size of another login's messages:
 * the PasswordMessage is the password's length plus 28 bytes.  So each
 * connection counts into a buffer of its own, and nobody but privileged
 * readers (pg_read_all_stats, through totals.c) adds that buffer to what
 * they see until the connection is done with it:
 *	- once authenticated (ClientAuthentication_hook, outside OpenSSL) the
 *	  backend hands its buffer over to its slot, under the lock, in one
 *	  step: from then on its counts are visible as its session is, the
 *	  handshake included (sslr_preauth_hand_over);
 *	- a connection that ends before that leaves its counts in its buffer;
 *	  they are "released" into sums every reader sees once its owner is
 *	  known to be gone: by a reader of the totals that finds the owner's
 *	  pid gone (sslr_preauth_release_gone), by the next owner of the
 *	  buffer when it authenticates, or at postmaster exit (the statistics
 *	  file).  Connections are counted in the same way.
 *
 * The buffers are indexed by MyPMChildSlot, which the postmaster gives
 * every child before its first byte, and which no two live children share.
 * A buffer records the pid of its owner; a new owner claims it with a
 * compare-and-swap of that pid, taking over what a dead owner left (those
 * counts are released at the new owner's hand-over).  Dead-end backends
 * (too many clients) have no child slot of their own: they, and a backend
 * whose buffer one of them holds, take any free buffer, of which there
 * are many (the children that never speak TLS have one each).  Only if
 * none is free does a backend count straight into the released sums.
 *
 * An owner is known to be gone when kill(pid, 0) says there is no such
 * process: the postmaster frees a child slot only after reaping its child.
 * A pid taken again by another process only delays the release.
 *
 * Locking rules:
 *	- A buffer's counts are atomics, added to only by its owner, with no
 *	  lock (inside OpenSSL's callbacks: no LWLock, allocation or ereport).
 *	- They are taken out of a buffer (hand-over, release) only under the
 *	  extension's LWLock held exclusively, so that a reader holding it
 *	  shared sees each byte once, pending or released.  A release first
 *	  swaps the dead owner's pid for 0: if a new owner claimed the buffer
 *	  in between, the swap fails and nothing moves.
 *	- The released sums are atomics: dead-end backends add to them with no
 *	  lock; everything else under the lock held exclusively.
 *	- A reset (totals.c) makes each buffer's current counts its baseline
 *	  (under the lock): they are before the reset, never shown afterwards.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "preauth.h"

/* Counts: connections, then the tally's fields. */
#define SSLR_COUNTS (1 + (int) SSLR_TALLY_FIELDS)

typedef struct SslrPreauthBuffer
{
	pg_atomic_uint32 owner;		/* pid of the backend counting here, or 0 */
	pg_atomic_uint64 counts[SSLR_COUNTS];	/* added to by the owner */
	int64		reset_base[SSLR_COUNTS];	/* before the last reset */
} SslrPreauthBuffer;

typedef struct SslrPreauth
{
	int			nbuffers;
	pg_atomic_uint64 released[SSLR_COUNTS];	/* owners gone, or none */
	SslrPreauthBuffer buffers[FLEXIBLE_ARRAY_MEMBER];
} SslrPreauth;

static SslrPreauth *sslr_preauth = NULL;

/* Where this backend counts before authentication. */
typedef enum SslrPreauthMode
{
	SSLR_PREAUTH_NONE,			/* nothing counted yet */
	SSLR_PREAUTH_BUFFER,		/* in its own buffer */
	SSLR_PREAUTH_RELEASED,		/* no buffer: straight into the released sums */
	SSLR_PREAUTH_DONE			/* authenticated: its slot counts */
} SslrPreauthMode;

static SslrPreauthMode sslr_mode = SSLR_PREAUTH_NONE;
static SslrPreauthBuffer *sslr_my_buffer = NULL;

static int
sslr_buffer_count(void)
{
	return SSLR_POSTMASTER_CHILD_SLOTS();
}

static Size
sslr_preauth_shmem_size(int nbuffers)
{
	return add_size(offsetof(SslrPreauth, buffers),
					mul_size(nbuffers, sizeof(SslrPreauthBuffer)));
}

void
sslr_preauth_shmem_request(void)
{
	RequestAddinShmemSpace(sslr_preauth_shmem_size(sslr_buffer_count()));
}

void
sslr_preauth_shmem_startup(void)
{
	int			nbuffers = sslr_buffer_count();
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	sslr_preauth = ShmemInitStruct("ssl_renegotiate preauth",
								   sslr_preauth_shmem_size(nbuffers), &found);
	if (!found)
	{
		memset(sslr_preauth, 0, sslr_preauth_shmem_size(nbuffers));
		sslr_preauth->nbuffers = nbuffers;
		for (int c = 0; c < SSLR_COUNTS; c++)
			pg_atomic_init_u64(&sslr_preauth->released[c], 0);
		for (int i = 0; i < nbuffers; i++)
		{
			pg_atomic_init_u32(&sslr_preauth->buffers[i].owner, 0);
			for (int c = 0; c < SSLR_COUNTS; c++)
				pg_atomic_init_u64(&sslr_preauth->buffers[i].counts[c], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Is the process with this pid gone?  kill(pid, 0) only asks.  A pid
 * taken again by another process reads as alive: its buffer then waits
 * for the next owner or the postmaster's exit, never released early.
 * errno is kept, as this runs inside OpenSSL's callbacks too.
 */
static bool
sslr_owner_gone(uint32 pid)
{
	int			saved_errno = errno;
	bool		gone;

	if ((int) pid == MyProcPid)
		return true;			/* an earlier process with our pid */
	gone = kill((pid_t) pid, 0) != 0 && errno == ESRCH;
	errno = saved_errno;
	return gone;
}

/* Make buffer this backend's if its owner is still the one seen. */
static bool
sslr_preauth_take(SslrPreauthBuffer *buffer, uint32 *seen)
{
	if (!pg_atomic_compare_exchange_u32(&buffer->owner, seen, (uint32) MyProcPid))
		return false;
	sslr_my_buffer = buffer;
	sslr_mode = SSLR_PREAUTH_BUFFER;
	return true;
}

/*
 * At this backend's first count: claim the buffer of its child slot if it
 * is free or its recorded owner is gone (a dead owner's counts come with
 * it), else any free one; with none, count into the released sums.
 * Atomics and kill() only.
 */
static void
sslr_preauth_claim(void)
{
	int			index = MyPMChildSlot - 1;
	uint32		seen;

	sslr_mode = SSLR_PREAUTH_RELEASED;
	if (!SSLR_DEAD_END_BACKEND() && index >= 0 && index < sslr_preauth->nbuffers)
	{
		SslrPreauthBuffer *buffer = &sslr_preauth->buffers[index];

		seen = pg_atomic_read_u32(&buffer->owner);
		while ((seen == 0 || sslr_owner_gone(seen)) && !sslr_preauth_take(buffer, &seen))
			;
	}

	/*
	 * A dead-end backend, or one whose buffer a dead-end backend took (its
	 * child slot before 18 is another child's).  Free buffers are many:
	 * children that never speak TLS have one too.
	 */
	for (int i = sslr_preauth->nbuffers - 1; i >= 0 && sslr_mode != SSLR_PREAUTH_BUFFER; i--)
	{
		seen = 0;
		(void) sslr_preauth_take(&sslr_preauth->buffers[i], &seen);
	}
	sslr_preauth_count(-1, 1);	/* the connection */
}

/*
 * Count before authentication (field -1: the connection itself).  After
 * authentication the slot counts alone (slots.c, totals.c).
 */
void
sslr_preauth_count(int field, int64 amount)
{
	pg_atomic_uint64 *counts;

	if (sslr_mode == SSLR_PREAUTH_DONE || sslr_preauth == NULL)
		return;
	if (sslr_mode == SSLR_PREAUTH_NONE)
		sslr_preauth_claim();
	counts = sslr_mode == SSLR_PREAUTH_BUFFER ? sslr_my_buffer->counts : sslr_preauth->released;
	pg_atomic_fetch_add_u64(&counts[field + 1], (uint64) amount);
}

/* dst[c] = counts[c] for every count */
static void
sslr_read_counts(pg_atomic_uint64 *counts, int64 *dst)
{
	for (int c = 0; c < SSLR_COUNTS; c++)
		dst[c] = (int64) pg_atomic_read_u64(&counts[c]);
}

static void
sslr_release(int c, int64 amount)
{
	pg_atomic_fetch_add_u64(&sslr_preauth->released[c], (uint64) amount);
}

/*
 * This backend authenticated and takes its slot, whose counts (own) are
 * what it added to its buffer: hand them over.  Returns the part of own
 * that the slot must not add to the totals again (before a reset, or in
 * the released sums already); anything else in the buffer was left by a
 * dead owner and is released now.  The caller holds the lock exclusively.
 */
void
sslr_preauth_hand_over(const SslrTally *own, SslrTally *baseline,
					   int64 *connection_baseline)
{
	const int64 *own_counts = (const int64 *) own;
	int64	   *base = (int64 *) baseline;
	int64		in_buffer[SSLR_COUNTS];
	SslrPreauthBuffer *buffer = sslr_my_buffer;

	memset(baseline, 0, sizeof(SslrTally));
	*connection_baseline = 0;
	if (sslr_mode == SSLR_PREAUTH_RELEASED)
	{
		/* counted where everyone sees it already */
		*baseline = *own;
		*connection_baseline = 1;
	}
	sslr_mode = SSLR_PREAUTH_DONE;
	if (buffer == NULL)
		return;

	sslr_read_counts(buffer->counts, in_buffer);
	for (int c = 0; c < SSLR_COUNTS; c++)
	{
		int64		mine = c == 0 ? 1 : own_counts[c - 1];
		int64		mine_before_reset = Min(buffer->reset_base[c], mine);

		/* the dead owner's part, less what is before the reset */
		sslr_release(c, in_buffer[c] - mine -
					 (buffer->reset_base[c] - mine_before_reset));
		if (c == 0)
			*connection_baseline = mine_before_reset;
		else
			base[c - 1] = mine_before_reset;
		pg_atomic_write_u64(&buffer->counts[c], 0);
		buffer->reset_base[c] = 0;
	}
	pg_write_barrier();
	pg_atomic_write_u32(&buffer->owner, 0);
	sslr_my_buffer = NULL;
}

/* Whether some buffer's owner is gone, its counts not yet released. */
bool
sslr_preauth_any_gone(void)
{
	for (int i = 0; i < sslr_preauth->nbuffers; i++)
	{
		uint32		owner = pg_atomic_read_u32(&sslr_preauth->buffers[i].owner);

		if (owner != 0 && sslr_owner_gone(owner))
			return true;
	}
	return false;
}

/*
 * Release the counts of buffers whose owners are gone.  The caller holds
 * the lock exclusively.
 */
void
sslr_preauth_release_gone(void)
{
	for (int i = 0; i < sslr_preauth->nbuffers; i++)
	{
		SslrPreauthBuffer *buffer = &sslr_preauth->buffers[i];
		uint32		owner = pg_atomic_read_u32(&buffer->owner);
		int64		left[SSLR_COUNTS];

		if (owner == 0 || !sslr_owner_gone(owner))
			continue;
		sslr_read_counts(buffer->counts, left);
		/* fails if a new owner took over meanwhile: it releases them */
		if (!pg_atomic_compare_exchange_u32(&buffer->owner, &owner, 0))
			continue;
		for (int c = 0; c < SSLR_COUNTS; c++)
		{
			sslr_release(c, left[c] - buffer->reset_base[c]);
			/* a new owner may be adding already: subtract, don't zero */
			pg_atomic_fetch_sub_u64(&buffer->counts[c], (uint64) left[c]);
			buffer->reset_base[c] = 0;
		}
	}
}

/*
 * A reset: every buffer's counts so far are before it.  The caller holds
 * the lock exclusively, and takes the released sums out of the totals.
 */
void
sslr_preauth_reset(void)
{
	for (int i = 0; i < sslr_preauth->nbuffers; i++)
		sslr_read_counts(sslr_preauth->buffers[i].counts,
						 sslr_preauth->buffers[i].reset_base);
}

/* The released sums; returns their connections. */
int64
sslr_preauth_read_released(SslrTally *tally)
{
	int64		sums[SSLR_COUNTS];

	sslr_read_counts(sslr_preauth->released, sums);
	memcpy(tally, &sums[1], sizeof(SslrTally));
	return sums[0];
}

/*
 * What the buffers hold since the last reset, for privileged readers and
 * the statistics file; returns its connections.
 */
int64
sslr_preauth_read_pending(SslrTally *tally)
{
	int64		sums[SSLR_COUNTS] = {0};

	for (int i = 0; i < sslr_preauth->nbuffers; i++)
	{
		SslrPreauthBuffer *buffer = &sslr_preauth->buffers[i];
		int64		counts[SSLR_COUNTS];

		sslr_read_counts(buffer->counts, counts);
		for (int c = 0; c < SSLR_COUNTS; c++)
			sums[c] += counts[c] - buffer->reset_base[c];
	}
	memcpy(tally, &sums[1], sizeof(SslrTally));
	return sums[0];
}

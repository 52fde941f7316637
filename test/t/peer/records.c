/*
 * records.c
 *	  What the client's records carry: a query one byte per record with a
 *	  KeyUpdate before each, and COPY FROM STDIN streams -- never reading
 *	  until the end (so the server's key update requests go unanswered),
 *	  cut off inside a message, with a KeyUpdate of ours every few kB, or
 *	  answering the server's requests as they come.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

/* COPY <table> FROM STDIN, up to CopyInResponse. */
static enum outcome
start_copy(const char *table)
{
	char		sql[256];
	struct qres r;
	enum outcome o;

	snprintf(sql, sizeof(sql), "COPY %s FROM STDIN", table);
	memset(&r, 0, sizeof(r));
	o = hp_send_query(sql);
	if (o == OUT_OK)
		o = hp_read_until_ready(&r, 'G');
	hp_say("copy_started=%d", o == OUT_OK);
	return o;
}

/* One CopyData message of COPY_ROW_BYTES (malloc'd; never freed here). */
static unsigned char *
copy_row_message(void)
{
	unsigned char *msg = malloc(5 + COPY_ROW_BYTES);

	if (msg == NULL)
		exit(2);
	msg[0] = 'd';
	hp_put32(msg + 1, 4 + COPY_ROW_BYTES);
	memset(msg + 5, 'x', COPY_ROW_BYTES - 1);
	msg[5 + COPY_ROW_BYTES - 1] = '\n';
	return msg;
}

/* CopyDone, then the answer. */
static enum outcome
finish_copy(void)
{
	unsigned char done[5];
	struct qres r;
	enum outcome o;

	done[0] = 'c';
	hp_put32(done + 1, 4);
	o = hp_write_all(done, sizeof(done), "write_copydone");
	hp_say("copy_done_sent=%d", o == OUT_OK);
	if (o != OUT_OK)
		return o;

	memset(&r, 0, sizeof(r));
	o = hp_read_until_ready(&r, 0);
	hp_say("copy_result=%s", hp_outcome_names[o]);
	if (r.tag[0])
		hp_say("copy_tag=%s", r.tag);
	return o;
}

/*
 * A Query message of n bytes, one byte per record, a KeyUpdate before
 * each: never two KeyUpdates in a row, yet one per byte.
 */
enum outcome
hp_mode_keyupdate_interleaved(long n)
{
	unsigned char *m;
	size_t		len = n < 32 ? 32 : (size_t) n;
	long		sent = 0;
	enum outcome o = OUT_OK;
	struct qres r;

	m = malloc(len);
	if (m == NULL)
		exit(2);
	/* 'Q', length, "SELECT 1 --xxx...", NUL */
	m[0] = 'Q';
	hp_put32(m + 1, (uint32_t) (len - 1));
	memcpy(m + 5, "SELECT 1 --", 11);
	memset(m + 16, 'x', len - 17);
	m[len - 1] = '\0';

	for (size_t i = 0; i < len && o == OUT_OK; i++)
	{
		o = hp_send_key_update(SSL_KEY_UPDATE_NOT_REQUESTED);
		if (o == OUT_OK)
		{
			sent++;
			o = hp_write_all(m + i, 1, "write_query_byte");
		}
	}
	free(m);
	hp_say("key_updates_sent=%ld", sent);
	if (o != OUT_OK)
		return o;
	memset(&r, 0, sizeof(r));
	o = hp_read_until_ready(&r, 0);
	hp_say("query_result=%s", hp_outcome_names[o]);
	if (r.datarows > 0)
		hp_say("query_row=%s", r.first_row);
	return o;
}

/*
 * COPY FROM STDIN of mb megabytes, never reading until CopyDone.  With
 * stall_kb > 0 instead: whole rows up to 32 kB short of stall_kb kB, then
 * the first 44 kB of a CopyData message announced as 1 MB, and silence
 * (hold point "stalled", then close without a word).  The record that
 * passes stall_kb belongs to a message the server has not got in full, so
 * it waits inside it for the rest.  That record is the last one we write
 * (28 kB, 8 kB short of stall_kb with the TLS overhead of the rows, then
 * one full 16 kB record): a server that ends the connection as it reads it
 * cannot fail a write of ours still under way.  After the stall, what the
 * server said is read: a FATAL (result=fatal), or the end of the
 * connection.
 */
enum outcome
hp_mode_never_answer(long mb, const char *table, long stall_kb)
{
	enum outcome o;
	unsigned char *msg;
	long		rows = stall_kb > 0 ? (stall_kb * 1024 - 32768) / (5 + COPY_ROW_BYTES)
		: mb * 1024 * 1024 / COPY_ROW_BYTES;
	long		sent_rows = 0;
	long long	sent_bytes = 0;

	if ((o = start_copy(table)) != OUT_OK)
		return o;
	msg = copy_row_message();

	/* no SSL_read from here until CopyDone is out */
	for (long i = 0; i < rows; i++)
	{
		o = hp_write_all(msg, 5 + COPY_ROW_BYTES, "write_copydata");
		if (o != OUT_OK)
			break;
		sent_rows++;
		sent_bytes += 5 + COPY_ROW_BYTES;
	}
	if (o == OUT_OK && stall_kb > 0)
	{
		/* part of a message, then silence: the server waits inside it */
		const size_t first = 28 * 1024,
					last = 16 * 1024;	/* one record, the one that crosses */
		unsigned char *part = malloc(first);

		if (part == NULL)
			exit(2);
		memset(part, 'x', first);
		part[0] = 'd';
		hp_put32(part + 1, 4 + 1024 * 1024);
		o = hp_write_all(part, first, "write_partial_copydata");
		if (o == OUT_OK)
			o = hp_write_all(part + first - last, last, "write_partial_copydata");
		if (o == OUT_OK)
			sent_bytes += first + last;
		free(part);
	}
	free(msg);
	hp_say("copy_rows_sent=%ld", sent_rows);
	hp_say("copy_bytes_sent=%lld", sent_bytes);
	if (o == OUT_OK && stall_kb > 0)
	{
		hp_say("stalled=1");
		hp_hold("stalled");

		/*
		 * Still up?  A server that ended the session has said why (a FATAL:
		 * read it) or closed the socket: a read says so (without blocking:
		 * data may be absent).
		 */
		hp_set_blocking(0);
		ERR_clear_error();
		{
			char		c;
			int			n = SSL_peek(hp_ssl, &c, 1);
			int			err = SSL_get_error(hp_ssl, n);

			if (n > 0)
			{
				struct qres r;

				hp_set_blocking(1);
				memset(&r, 0, sizeof(r));
				o = hp_read_until_ready(&r, 0);
				if (o == OUT_OK)
					hp_say("after_stall=open");
			}
			else if (err == SSL_ERROR_WANT_READ)
			{
				hp_say("after_stall=open");
				o = OUT_OK;
			}
			else
				o = hp_ssl_failure(n, "after_stall");
		}
		hp_say("copy_done_sent=0");
		hp_say("result=%s", o == OUT_OK ? "stalled" : hp_outcome_names[o]);
		close(hp_sock);
		exit(0);
	}
	if (o != OUT_OK)
	{
		hp_say("copy_done_sent=0");
		return o;
	}

	return finish_copy();
}

/* COPY FROM of mb megabytes, our KeyUpdate every every_kb kB. */
enum outcome
hp_mode_copy_keyupdates(long mb, const char *table)
{
	enum outcome o;
	unsigned char *msg;
	long		rows = mb * 1024 * 1024 / COPY_ROW_BYTES;
	long long	since_update = 0;
	long		sent = 0;

	if ((o = start_copy(table)) != OUT_OK)
		return o;
	msg = copy_row_message();
	for (long i = 0; i < rows && o == OUT_OK; i++)
	{
		o = hp_write_all(msg, 5 + COPY_ROW_BYTES, "write_copydata");
		since_update += 5 + COPY_ROW_BYTES;
		if (o == OUT_OK && since_update >= hp_every_kb * 1024)
		{
			o = hp_send_key_update(SSL_KEY_UPDATE_NOT_REQUESTED);
			since_update = 0;
			sent += o == OUT_OK;
		}
	}
	free(msg);
	hp_say("key_updates_sent=%ld", sent);
	if (o != OUT_OK)
		return o;
	return finish_copy();
}

/*
 * COPY FROM for a while, an 8 kB row every 5 ms, and after each row a read
 * that does not block: it lets OpenSSL see the server's KeyUpdate requests
 * (and answer them with the next write), as a client that watches its
 * socket while it sends does.
 */
enum outcome
hp_mode_copy_answering(long seconds, const char *table, int then_query)
{
	enum outcome o;
	unsigned char *msg;
	double		start = hp_now_seconds();
	long		rows = 0;

	if ((o = start_copy(table)) != OUT_OK)
		return o;
	msg = copy_row_message();
	while (o == OUT_OK && hp_now_seconds() - start < seconds)
	{
		char		c;
		int			n;

		o = hp_write_all(msg, 5 + COPY_ROW_BYTES, "write_copydata");
		if (o != OUT_OK)
			break;
		rows++;
		usleep(5000);

		hp_set_blocking(0);
		ERR_clear_error();
		n = SSL_peek(hp_ssl, &c, 1);
		if (n <= 0 && SSL_get_error(hp_ssl, n) != SSL_ERROR_WANT_READ)
			o = hp_ssl_failure(n, "poll");
		else if (n > 0)
		{
			hp_say("io_error=poll:the server answered during COPY");
			o = OUT_ERROR;
		}
		hp_set_blocking(1);
	}
	free(msg);
	hp_say("copy_rows_sent=%ld", rows);
	hp_say("copy_seconds=%.3f", hp_now_seconds() - start);
	if (o != OUT_OK)
		return o;
	o = finish_copy();
	if (o == OUT_OK && then_query)
	{
		long		before = hp_key_updates_sent_so_far();
		struct qres r;

		for (int i = 0; i < 2 && o == OUT_OK; i++)
			o = hp_run_query("SELECT 1", "after_copy", &r);
		hp_say("key_updates_sent_after_copy=%ld", hp_key_updates_sent_so_far() - before);
	}
	return o;
}

/*
 * stalls.c
 *	  A peer that stops reading, or never speaks: a large answer left
 *	  unread, a query whose answer waits, an idle session, silence after
 *	  the handshake.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

/*
 * A query with a large answer, then nothing read for as long as the test
 * holds us: the server's HelloRequest waits unread.
 */
enum outcome
hp_mode_late_reader(long rows)
{
	char		sql[128];
	struct qres r;
	enum outcome o;

	snprintf(sql, sizeof(sql),
			 "SELECT repeat('x', 70000) FROM generate_series(1, %ld)", rows);
	memset(&r, 0, sizeof(r));
	if ((o = hp_send_query(sql)) != OUT_OK)
		return o;
	hp_hold("query_sent");
	o = hp_read_until_ready(&r, 0);
	hp_say("late_result=%s", hp_outcome_names[o]);
	hp_say("late_datarows=%ld", r.datarows);
	hp_say("late_datarow_bytes=%lld", r.datarow_bytes);
	if (o != OUT_OK)
		return o;
	return hp_run_query("SELECT 1", "query", &r);
}

/*
 * --query, padded with a comment to pad bytes, then nothing read for as
 * long as the test holds us.
 */
enum outcome
hp_mode_hold_before_reading(long pad)
{
	size_t		ql = strlen(hp_query_text);
	size_t		len = (size_t) pad > ql + 8 ? (size_t) pad : ql + 8;
	char	   *sql = malloc(len + 1);
	struct qres r;
	enum outcome o;

	if (sql == NULL)
		exit(2);
	memcpy(sql, hp_query_text, ql);
	memcpy(sql + ql, " --", 3);
	memset(sql + ql + 3, 'x', len - ql - 3);
	sql[len] = '\0';
	o = hp_send_query(sql);
	free(sql);
	if (o != OUT_OK)
		return o;
	hp_hold("query_sent");
	memset(&r, 0, sizeof(r));
	o = hp_read_until_ready(&r, 0);
	hp_say("held_result=%s", hp_outcome_names[o]);
	if (r.datarows > 0)
		hp_say("held_row=%s", r.first_row);
	if (o != OUT_OK)
		return o;
	return hp_run_query("SELECT 1", "query", &r);
}

/* Idle for as long as the test holds us, then two queries. */
enum outcome
hp_mode_idle_then_query(void)
{
	struct qres r;
	enum outcome o;

	hp_hold("idle");
	o = hp_run_query("SELECT 1", "first", &r);
	if (o != OUT_OK)
		return o;
	return hp_run_query("SELECT 1", "query", &r);
}

/* After the handshake: nothing, until the server gives up on us. */
enum outcome
hp_mode_silence(void)
{
	char		c;
	int			n;
	enum outcome o;

	hp_hold("silent");
	ERR_clear_error();
	errno = 0;
	n = SSL_read(hp_ssl, &c, 1);
	o = n > 0 ? OUT_ERROR : hp_ssl_failure(n, "silence");
	hp_say_tcp_counts();
	return o;
}

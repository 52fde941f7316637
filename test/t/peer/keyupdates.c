/*
 * keyupdates.c
 *	  TLS 1.3 key updates the server did not ask for: in a row, queued
 *	  behind a busy server, one per query.
 */
#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

/* Our own KeyUpdate, sent now. */
enum outcome
hp_send_key_update(int type)
{
	int			ret;

	ERR_clear_error();
	if (!SSL_key_update(hp_ssl, type))
	{
		hp_say("io_error=key_update:refused");
		return OUT_TLS_ERROR;
	}
	errno = 0;
	ret = SSL_do_handshake(hp_ssl);
	if (ret != 1)
		return hp_ssl_failure(ret, "send_key_update");
	return OUT_OK;
}

/* N KeyUpdates in a row, then one query. */
enum outcome
hp_mode_keyupdate_flood(long n, int type)
{
	long		sent = 0;
	enum outcome o = OUT_OK;
	struct qres r;

	for (long i = 0; i < n; i++)
	{
		int			ret;

		ERR_clear_error();
		if (!SSL_key_update(hp_ssl, type))
		{
			char		detail[256];

			ERR_error_string_n(ERR_peek_error(), detail, sizeof(detail));
			hp_say("io_error=key_update:%s", detail);
			o = OUT_TLS_ERROR;
			break;
		}
		errno = 0;
		ret = SSL_do_handshake(hp_ssl);
		if (ret != 1)
		{
			o = hp_ssl_failure(ret, "send_key_update");
			break;
		}
		sent++;
	}
	hp_say("key_updates_sent=%ld", sent);
	if (o != OUT_OK)
		return o;
	return hp_run_query("SELECT 1", "query", &r);
}

/*
 * A backlog: send a query that keeps the server busy (it waits for an
 * advisory lock the test holds), then as many of n KeyUpdates in a row as
 * the socket buffers take without blocking, and hold ("flooded") so that
 * the test can release the lock.  The server then finds them all queued
 * when it next reads.  Then read the query's answer and try "SELECT 1".
 */
enum outcome
hp_mode_keyupdate_backlog(long n)
{
	long		queued = 0;
	int			pending = 0;
	enum outcome o;
	struct qres r;

	o = hp_send_query("SELECT pg_advisory_lock(4242), pg_advisory_unlock(4242)");
	if (o != OUT_OK)
		return o;

	hp_set_blocking(0);
	for (long i = 0; i < n; i++)
	{
		int			ret;

		ERR_clear_error();
		if (!SSL_key_update(hp_ssl, SSL_KEY_UPDATE_NOT_REQUESTED))
			break;
		errno = 0;
		ret = SSL_do_handshake(hp_ssl);
		if (ret == 1)
		{
			queued++;
			continue;
		}
		if (SSL_get_error(hp_ssl, ret) == SSL_ERROR_WANT_WRITE)
		{
			pending = 1;		/* part of it is out: finish it later */
			break;
		}
		hp_set_blocking(1);
		o = hp_ssl_failure(ret, "send_key_update");
		hp_say("key_updates_queued=%ld", queued);
		return o;
	}
	hp_say("key_updates_queued=%ld", queued);
	hp_say("socket_full=%d", pending);
	hp_hold("flooded");
	hp_set_blocking(1);
	if (pending)
	{
		int			ret;

		ERR_clear_error();
		errno = 0;
		ret = SSL_do_handshake(hp_ssl);
		if (ret != 1)
			return hp_ssl_failure(ret, "send_key_update");
	}

	memset(&r, 0, sizeof(r));
	o = hp_read_until_ready(&r, 0);
	hp_say("lock_query_result=%s", hp_outcome_names[o]);
	if (o != OUT_OK)
		return o;
	return hp_run_query("SELECT 1", "query", &r);
}

/* N times: a KeyUpdate, then a query and its whole answer. */
enum outcome
hp_mode_keyupdate_spaced(long n)
{
	long		sent = 0;
	long		answered = 0;
	enum outcome o = OUT_OK;
	struct qres r;

	for (long i = 0; i < n && o == OUT_OK; i++)
	{
		int			ret;

		ERR_clear_error();
		if (!SSL_key_update(hp_ssl, SSL_KEY_UPDATE_NOT_REQUESTED))
		{
			hp_say("io_error=key_update:refused");
			o = OUT_TLS_ERROR;
			break;
		}
		errno = 0;
		ret = SSL_do_handshake(hp_ssl);
		if (ret != 1)
		{
			o = hp_ssl_failure(ret, "send_key_update");
			break;
		}
		sent++;
		memset(&r, 0, sizeof(r));
		o = hp_send_query("SELECT 1");
		if (o == OUT_OK)
			o = hp_read_until_ready(&r, 0);
		if (o == OUT_OK && r.datarows == 1 && strcmp(r.first_row, "1") == 0)
			answered++;
	}
	hp_say("key_updates_sent=%ld", sent);
	hp_say("queries_answered=%ld", answered);
	return o;
}

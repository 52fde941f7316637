/*
 * renegotiation.c
 *	  TLS 1.2 renegotiation: one the client starts (the server must refuse
 *	  it), one the client refuses, and one that changes the cipher.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

/* TLS 1.2: a client-initiated renegotiation, then a query. */
enum outcome
hp_mode_renegotiate(void)
{
	int			ret;
	struct qres r;
	const char *what = "unknown";

	ERR_clear_error();
	if (!SSL_renegotiate(hp_ssl))
	{
		hp_say("renegotiation=not_started");
		return hp_run_query("SELECT 1", "query", &r);
	}

	/*
	 * Without a hold, SSL_do_handshake sends the ClientHello and then blocks
	 * for the answer.  With one, send the ClientHello only, let the test look
	 * at the server, then read: meanwhile OpenSSL reads from an empty memory
	 * BIO (so it cannot see the server's answer yet) and writes to the
	 * socket.
	 */
	if (hp_hold_enabled)
	{
		BIO		   *sock_bio = SSL_get_wbio(hp_ssl);
		BIO		   *empty = BIO_new(BIO_s_mem());

		if (empty == NULL)
			exit(2);
		BIO_set_mem_eof_return(empty, -1);	/* "retry", not EOF */
		SSL_set0_rbio(hp_ssl, empty);	/* drops one reference of sock_bio */
		errno = 0;
		ret = SSL_do_handshake(hp_ssl);
		if (ret != 1 && SSL_get_error(hp_ssl, ret) == SSL_ERROR_WANT_READ)
		{
			ERR_clear_error();
			hp_say("renegotiation_request=sent");
			hp_hold("renegotiation_sent");
		}
		BIO_up_ref(sock_bio);
		SSL_set0_rbio(hp_ssl, sock_bio);	/* frees the memory BIO */
		if (ret != 1)
		{
			errno = 0;
			ret = SSL_do_handshake(hp_ssl);
		}
	}
	else
	{
		errno = 0;
		ret = SSL_do_handshake(hp_ssl);
	}

	if (ret == 1)
	{
		/* the handshake may only look done: did a renegotiation happen? */
		what = SSL_renegotiate_pending(hp_ssl) ? "pending" : "completed";
		hp_say("renegotiation=%s", what);
	}
	else
	{
		hp_say("renegotiation=failed:%s", hp_outcome_names[hp_ssl_failure(ret, "renegotiate")]);
	}
	hp_say("renegotiations_started=%ld", SSL_num_renegotiations(hp_ssl));

	/* whatever happened, does the session still answer? */
	return hp_run_query("SELECT 1", "query", &r);
}

/* TLS 1.2 with SSL_OP_NO_RENEGOTIATION: read a large answer. */
enum outcome
hp_mode_refuse_renegotiation(long bytes)
{
	char		sql[128];
	struct qres r;

	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	return hp_run_query(sql, "query", &r);
}

/* SELECT repeat('x', bytes); then the cipher in force. */
enum outcome
hp_mode_read_large(long bytes)
{
	char		sql[128];
	struct qres r;
	enum outcome o;

	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	o = hp_run_query(sql, "query", &r);
	hp_say("cipher_after=%s", SSL_get_cipher_name(hp_ssl));
	return o;
}

/*
 * SELECT repeat('x', bytes) and "SELECT 1" written together, before any
 * answer is read, as a pipelining client does: while the first answer goes
 * out, the second query already waits at the server.
 */
enum outcome
hp_mode_read_large_pipelined(long bytes)
{
	char		sql[128];
	struct qres r;
	enum outcome o;

	memset(&r, 0, sizeof(r));
	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	o = hp_send_query(sql);
	if (o == OUT_OK)
		o = hp_send_query("SELECT 1");
	if (o == OUT_OK)
		o = hp_read_until_ready(&r, 0);
	hp_say("query_result=%s", hp_outcome_names[o]);
	hp_say("query_datarow_bytes=%lld", r.datarow_bytes);
	if (o != OUT_OK)
		return o;
	memset(&r, 0, sizeof(r));
	o = hp_read_until_ready(&r, 0);
	hp_say("second_result=%s", hp_outcome_names[o]);
	hp_say("second_row=%s", r.first_row);
	return o;
}

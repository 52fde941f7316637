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
mode_renegotiate(void)
{
	int			ret;
	struct qres r;
	const char *what = "unknown";

	ERR_clear_error();
	if (!SSL_renegotiate(ssl))
	{
		say("renegotiation=not_started");
		return run_query("SELECT 1", "query", &r);
	}

	/*
	 * Without a hold, SSL_do_handshake sends the ClientHello and then blocks
	 * for the answer.  With one, send the ClientHello only, let the test look
	 * at the server, then read: meanwhile OpenSSL reads from an empty memory
	 * BIO (so it cannot see the server's answer yet) and writes to the
	 * socket.
	 */
	if (hold_enabled)
	{
		BIO		   *sock_bio = SSL_get_wbio(ssl);
		BIO		   *empty = BIO_new(BIO_s_mem());

		if (empty == NULL)
			exit(2);
		BIO_set_mem_eof_return(empty, -1);	/* "retry", not EOF */
		SSL_set0_rbio(ssl, empty);	/* drops one reference of sock_bio */
		errno = 0;
		ret = SSL_do_handshake(ssl);
		if (ret != 1 && SSL_get_error(ssl, ret) == SSL_ERROR_WANT_READ)
		{
			ERR_clear_error();
			say("renegotiation_request=sent");
			hold("renegotiation_sent");
		}
		BIO_up_ref(sock_bio);
		SSL_set0_rbio(ssl, sock_bio);	/* frees the memory BIO */
		if (ret != 1)
		{
			errno = 0;
			ret = SSL_do_handshake(ssl);
		}
	}
	else
	{
		errno = 0;
		ret = SSL_do_handshake(ssl);
	}

	if (ret == 1)
	{
		/* the handshake may only look done: did a renegotiation happen? */
		what = SSL_renegotiate_pending(ssl) ? "pending" : "completed";
		say("renegotiation=%s", what);
	}
	else
	{
		say("renegotiation=failed:%s", outcome_names[ssl_failure(ret, "renegotiate")]);
	}
	say("renegotiations_started=%ld", SSL_num_renegotiations(ssl));

	/* whatever happened, does the session still answer? */
	return run_query("SELECT 1", "query", &r);
}

/* TLS 1.2 with SSL_OP_NO_RENEGOTIATION: read a large answer. */
enum outcome
mode_refuse_renegotiation(long bytes)
{
	char		sql[128];
	struct qres r;

	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	return run_query(sql, "query", &r);
}

/* SELECT repeat('x', bytes); then the cipher in force. */
enum outcome
mode_read_large(long bytes)
{
	char		sql[128];
	struct qres r;
	enum outcome o;

	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	o = run_query(sql, "query", &r);
	say("cipher_after=%s", SSL_get_cipher_name(ssl));
	return o;
}

/*
 * SELECT repeat('x', bytes) and "SELECT 1" written together, before any
 * answer is read, as a pipelining client does: while the first answer goes
 * out, the second query already waits at the server.
 */
enum outcome
mode_read_large_pipelined(long bytes)
{
	char		sql[128];
	struct qres r;
	enum outcome o;

	memset(&r, 0, sizeof(r));
	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	o = send_query(sql);
	if (o == OUT_OK)
		o = send_query("SELECT 1");
	if (o == OUT_OK)
		o = read_until_ready(&r, 0);
	say("query_result=%s", outcome_names[o]);
	say("query_datarow_bytes=%lld", r.datarow_bytes);
	if (o != OUT_OK)
		return o;
	memset(&r, 0, sizeof(r));
	o = read_until_ready(&r, 0);
	say("second_result=%s", outcome_names[o]);
	say("second_row=%s", r.first_row);
	return o;
}

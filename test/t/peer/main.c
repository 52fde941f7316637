/*
 * main.c
 *	  hostile_peer: a deliberately misbehaving TLS client of a PostgreSQL
 *	  server, for the ssl_renegotiate TAP tests (test/t/030_hostile_peers.pl and
 *	  others, through SslrTest::run_hostile_peer).  This file: what it does,
 *	  its options, and which mode runs.
 *
 * It speaks just enough of the frontend/backend protocol (SSLRequest, TLS
 * handshake, StartupMessage with trust authentication, simple Query, COPY
 * FROM STDIN) to do things libpq never does:
 *
 *   keyupdate-flood N             N TLS 1.3 KeyUpdate(update_not_requested)
 *                                 in a row, no application data between,
 *                                 then "SELECT 1"
 *   keyupdate-requested-flood N   the same with update_requested
 *   keyupdate-spaced N            N times: one KeyUpdate, then "SELECT 1"
 *                                 and its whole answer
 *   keyupdate-backlog N           a query that waits for advisory lock 4242
 *                                 (held by the test), then up to N
 *                                 KeyUpdates in a row, as many as the
 *                                 socket takes without blocking (hold point
 *                                 "flooded": release the lock), then read
 *                                 the answer and send "SELECT 1"
 *   never-answer MB               COPY <table> FROM STDIN of MB megabytes
 *                                 (8 kB rows) without ever reading, so the
 *                                 server's KeyUpdate requests go unanswered
 *                                 and our sending key never changes
 *   stall-after KB                the same, but cross KB kB inside a
 *                                 CopyData message and go silent before its
 *                                 end (hold point "stalled"; result=stalled
 *                                 if the connection was still open then,
 *                                 fatal if the server said why it ended)
 *   renegotiate                   (TLS 1.2) a client-initiated
 *                                 renegotiation, then "SELECT 1"
 *   refuse-renegotiation [BYTES]  (TLS 1.2, SSL_OP_NO_RENEGOTIATION) read
 *                                 the answer of SELECT repeat('x', BYTES)
 *   read-large BYTES              read the answer of SELECT repeat('x', BYTES)
 *                                 (with --next-cipher: what a renegotiation
 *                                 the server starts then agrees on)
 *   read-large-pipelined BYTES    the same query and "SELECT 1" written
 *                                 together before reading: the second
 *                                 waits at the server during the answer
 *   keyupdate-interleaved N       a query of N bytes sent one byte per
 *                                 record, each record after a KeyUpdate
 *   copy-keyupdates MB            COPY <table> FROM STDIN of MB megabytes
 *                                 (8 kB rows), with a KeyUpdate of ours
 *                                 every --every-kb kB (64)
 *   copy-answering SECONDS        COPY <table> FROM STDIN for SECONDS
 *                                 seconds, an 8 kB row every 5 ms, reading
 *                                 (without blocking) after each row so that
 *                                 the server's KeyUpdate requests are
 *                                 answered promptly
 *   copy-answering-then-query SECONDS
 *                                 the same, then "SELECT 1" twice: the
 *                                 server sent data again, so it may ask for
 *                                 a new key, which the second one carries
 *                                 (key_updates_sent_after_copy=N)
 *   late-reader ROWS              SELECT repeat('x', 70000) FROM
 *                                 generate_series(1, ROWS), then hold
 *                                 ("query_sent") before reading anything: a
 *                                 renegotiation the server starts meanwhile
 *                                 goes unanswered until the hold ends
 *   hold-before-reading PAD       send --query padded with a comment to PAD
 *                                 bytes, then hold ("query_sent") before
 *                                 reading its answer; then "SELECT 1"
 *   idle-then-query               hold ("idle") with nothing sent or read,
 *                                 then "SELECT 1" twice
 *   silence                       (with --no-startup) nothing after the
 *                                 handshake (hold point "silent"); wait
 *                                 until the server closes, then report the
 *                                 socket's kernel counts
 *
 * Options (before the mode): --host H (127.0.0.1), --port P (required),
 * --user U (postgres), --db D (postgres), --tls 1.2|1.3 (1.3),
 * --table T (t; never-answer, stall-after), --hold,
 * --preauth-key-updates N (N KeyUpdates in a row right after the TLS
 * handshake, before the StartupMessage, i.e. before authentication),
 * --no-startup (stop after the handshake: no StartupMessage),
 * --cipher LIST (TLS 1.2 cipher list of the handshake), --next-cipher LIST
 * (the list offered from then on, i.e. in renegotiations), --every-kb K,
 * --cert FILE --key FILE (a client certificate), --query SQL,
 * --ciphersuites LIST (the TLS 1.3 suites offered), --password PW (answer
 * the server's AuthenticationCleartextPassword with PW, after hold point
 * "password_requested"), --wait-close (at the end, after the Terminate
 * message and instead of our close_notify, and after a FATAL or a failed
 * handshake at start-up: read until the server closes, then report the
 * socket's kernel counts as tcp_bytes_received / tcp_bytes_acked).
 *
 * Facts printed by every mode: client_port=P once connected, and at the end
 * key_updates_sent_total / key_updates_received_total (KeyUpdate messages
 * this client wrote and read, as its TLS library saw them) and
 * renegotiations_completed (TLS 1.2 handshakes completed after the first).
 *
 * With --hold, at each hold point the client prints "hold=NAME" and waits
 * for a line on stdin (so that a test can look at the server meanwhile):
 * "renegotiation_sent" (renegotiate: the ClientHello is out, nothing read
 * yet), "stalled" (stall-after), "flooded" (keyupdate-backlog),
 * "password_requested" (--password: the server asked, nothing answered
 * yet) and "end" (the connection is still up after the mode ran).
 *
 * Output: one "key=value" line per fact on stdout, flushed at once; the
 * last is always "result=ok|error|fatal|closed|tls_error|timeout":
 *   ok         the last query was answered (ReadyForQuery)
 *   error      it was answered with an ERROR, the session goes on
 *   fatal      the server sent a FATAL ErrorResponse and closed
 *   closed     the connection ended without an answer (EOF, close_notify,
 *              reset, EPIPE)
 *   tls_error  a TLS-level failure (an alert, a protocol error)
 *   timeout    the hard timeout (60 s) expired
 * Exit status: 0 after the mode ran, 2 on usage or start-up errors (a
 * result line is printed for the latter too), 3 on the timeout.
 *
 * The modes live by attack family: keyupdates.c (TLS 1.3 key updates),
 * renegotiation.c (TLS 1.2 renegotiation), records.c (what the records
 * carry: one byte each, COPY streams never read back), stalls.c (a peer
 * that does not read, or says nothing); session.c connects and starts the
 * session, protocol.c speaks the protocol.
 *
 * Build: cc -O1 -Wall -Wextra -Werror -o hostile_peer test/t/peer/[a-z]*.c -lssl -lcrypto
 * (SslrTest::build_hostile_peer).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

int			hp_hold_enabled = 0;
long		hp_preauth_key_updates = 0;
int			hp_no_startup = 0;
const char *hp_cipher_list = NULL;
const char *hp_ciphersuites = NULL;
const char *hp_next_cipher_list = NULL;
long		hp_every_kb = 64;
const char *hp_cert_file = NULL;
const char *hp_key_file = NULL;
const char *hp_query_text = "SELECT 1";
const char *hp_password = NULL;
int			hp_wait_close = 0;

static void
on_alarm(int sig)
{
	static const char msg[] = "result=timeout\n";

	(void) sig;
	/* async-signal-safe only */
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(4);
	_exit(3);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: hostile_peer --port P [--host H] [--user U] [--db D] [--tls 1.2|1.3]\n"
			"                    [--table T] [--hold] [--preauth-key-updates N] [--no-startup]\n"
			"                    [--cipher LIST] [--next-cipher LIST] [--every-kb K]\n"
			"                    [--cert FILE --key FILE] [--query SQL] [--ciphersuites LIST]\n"
			"                    [--password PW] [--wait-close]\n"
			"                    MODE [ARG]\n"
			"modes: keyupdate-flood N | keyupdate-requested-flood N | keyupdate-spaced N |\n"
			"       keyupdate-backlog N |\n"
			"       never-answer MB | stall-after KB | renegotiate |\n"
			"       refuse-renegotiation [BYTES] | read-large BYTES |\n"
			"       read-large-pipelined BYTES |\n"
			"       keyupdate-interleaved N | copy-keyupdates MB | copy-answering SECONDS |\n"
			"       copy-answering-then-query SECONDS |\n"
			"       late-reader ROWS | hold-before-reading PAD | idle-then-query | silence\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	const char *user = "postgres";
	const char *db = "postgres";
	const char *tls = "1.3";
	const char *table = "t";
	const char *mode = NULL;
	long		arg = -1;
	int			port = 0;
	long		extra_options = 0;
	enum outcome o = OUT_TLS_ERROR;
	int			i;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm(HARD_TIMEOUT_S);

	for (i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--hold") == 0)
			hp_hold_enabled = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--host") == 0)
			host = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--port") == 0)
			port = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--user") == 0)
			user = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--db") == 0)
			db = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--tls") == 0)
			tls = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--table") == 0)
			table = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--preauth-key-updates") == 0)
			hp_preauth_key_updates = atol(argv[++i]);
		else if (strcmp(argv[i], "--no-startup") == 0)
			hp_no_startup = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--cipher") == 0)
			hp_cipher_list = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--next-cipher") == 0)
			hp_next_cipher_list = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--every-kb") == 0)
			hp_every_kb = atol(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--cert") == 0)
			hp_cert_file = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--key") == 0)
			hp_key_file = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--query") == 0)
			hp_query_text = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--ciphersuites") == 0)
			hp_ciphersuites = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--password") == 0)
			hp_password = argv[++i];
		else if (strcmp(argv[i], "--wait-close") == 0)
			hp_wait_close = 1;
		else if (argv[i][0] == '-')
			usage();
		else
			break;
	}
	if (i >= argc || port <= 0)
		usage();
	mode = argv[i++];
	if (i < argc)
		arg = atol(argv[i]);
	if (strcmp(tls, "1.2") != 0 && strcmp(tls, "1.3") != 0)
		usage();
	if (strlen(user) > 100 || strlen(db) > 100 || strlen(table) > 100 ||
		(hp_password != NULL && strlen(hp_password) > 200))
		usage();

	if (strcmp(mode, "refuse-renegotiation") == 0)
		extra_options |= (long) SSL_OP_NO_RENEGOTIATION;

	hp_say("mode=%s", mode);
	if (hp_connect_and_start(host, port, user, db, tls, extra_options) != 0)
		return 2;

	if (strcmp(mode, "keyupdate-flood") == 0 && arg >= 0)
		o = hp_mode_keyupdate_flood(arg, SSL_KEY_UPDATE_NOT_REQUESTED);
	else if (strcmp(mode, "keyupdate-requested-flood") == 0 && arg >= 0)
		o = hp_mode_keyupdate_flood(arg, SSL_KEY_UPDATE_REQUESTED);
	else if (strcmp(mode, "keyupdate-backlog") == 0 && arg >= 0)
		o = hp_mode_keyupdate_backlog(arg);
	else if (strcmp(mode, "keyupdate-spaced") == 0 && arg >= 0)
		o = hp_mode_keyupdate_spaced(arg);
	else if (strcmp(mode, "never-answer") == 0 && arg > 0)
		o = hp_mode_never_answer(arg, table, 0);
	else if (strcmp(mode, "stall-after") == 0 && arg > 0)
		o = hp_mode_never_answer(0, table, arg);
	else if (strcmp(mode, "renegotiate") == 0)
		o = hp_mode_renegotiate();
	else if (strcmp(mode, "refuse-renegotiation") == 0)
		o = hp_mode_refuse_renegotiation(arg > 0 ? arg : 300000);
	else if (strcmp(mode, "read-large") == 0 && arg > 0)
		o = hp_mode_read_large(arg);
	else if (strcmp(mode, "read-large-pipelined") == 0 && arg > 0)
		o = hp_mode_read_large_pipelined(arg);
	else if (strcmp(mode, "keyupdate-interleaved") == 0 && arg > 0)
		o = hp_mode_keyupdate_interleaved(arg);
	else if (strcmp(mode, "copy-keyupdates") == 0 && arg > 0 && hp_every_kb > 0)
		o = hp_mode_copy_keyupdates(arg, table);
	else if (strcmp(mode, "copy-answering") == 0 && arg > 0)
		o = hp_mode_copy_answering(arg, table, 0);
	else if (strcmp(mode, "copy-answering-then-query") == 0 && arg > 0)
		o = hp_mode_copy_answering(arg, table, 1);
	else if (strcmp(mode, "late-reader") == 0 && arg > 0)
		o = hp_mode_late_reader(arg);
	else if (strcmp(mode, "hold-before-reading") == 0 && arg > 0)
		o = hp_mode_hold_before_reading(arg);
	else if (strcmp(mode, "idle-then-query") == 0)
		o = hp_mode_idle_then_query();
	else if (strcmp(mode, "silence") == 0 && hp_no_startup)
	{
		o = hp_mode_silence();
		hp_say_tls_counts();
		hp_say("result=%s", hp_outcome_names[o]);
		close(hp_sock);
		return 0;
	}
	else
		usage();

	if (o == OUT_OK || o == OUT_ERROR)
	{
		unsigned char term[5];

		hp_hold("end");
		term[0] = 'X';
		hp_put32(term + 1, 4);
		(void) hp_write_all(term, sizeof(term), "write_terminate");
		ERR_clear_error();
		/* no close_notify of ours: the server would not read it */
		if (hp_wait_close)
			hp_drain_and_say_tcp_counts();
		else
			(void) SSL_shutdown(hp_ssl);
	}
	hp_say_tls_counts();
	hp_say("result=%s", hp_outcome_names[o]);
	close(hp_sock);
	return 0;
}

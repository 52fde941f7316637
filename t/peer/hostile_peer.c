/*
 * hostile_peer.c
 *	  A deliberately misbehaving TLS client of a PostgreSQL server, for the
 *	  ssl_renegotiate TAP tests (t/030_hostile_peers.pl).
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
 *                                 if the connection was still open then)
 *   renegotiate                   (TLS 1.2) a client-initiated
 *                                 renegotiation, then "SELECT 1"
 *   refuse-renegotiation [BYTES]  (TLS 1.2, SSL_OP_NO_RENEGOTIATION) read
 *                                 the answer of SELECT repeat('x', BYTES)
 *   read-large BYTES              read the answer of SELECT repeat('x', BYTES)
 *                                 (with --next-cipher: what a renegotiation
 *                                 the server starts then agrees on)
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
 * --ciphersuites LIST (the TLS 1.3 suites offered).
 *
 * Facts printed by every mode: client_port=P once connected, and at the end
 * key_updates_sent_total / key_updates_received_total (KeyUpdate messages
 * this client wrote and read, as its TLS library saw them) and
 * renegotiations_completed (TLS 1.2 handshakes completed after the first).
 *
 * With --hold, at each hold point the client prints "hold=NAME" and waits
 * for a line on stdin (so that a test can look at the server meanwhile):
 * "renegotiation_sent" (renegotiate: the ClientHello is out, nothing read
 * yet), "stalled" (stall-after), "flooded" (keyupdate-backlog) and "end"
 * (the connection is still up after the mode ran).
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
 * Build: cc -O1 -Wall -Wextra -Werror -o hostile_peer hostile_peer.c -lssl -lcrypto
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/*
 * OpenSSL 1.1.1 has no error for a peer that closes without close_notify:
 * it reports SSL_ERROR_SYSCALL with errno 0, which ssl_failure() takes as a
 * close already.  A reason code no error carries keeps the test below.
 */
#ifndef SSL_R_UNEXPECTED_EOF_WHILE_READING
#define SSL_R_UNEXPECTED_EOF_WHILE_READING (-1)
#endif

#define HARD_TIMEOUT_S 60
#define COPY_ROW_BYTES 8192		/* one CopyData payload: 8191 'x' + '\n' */

/* how an I/O attempt ended */
enum outcome
{
	OUT_OK,
	OUT_ERROR,					/* ErrorResponse, not FATAL; RFQ followed */
	OUT_FATAL,					/* ErrorResponse FATAL (or PANIC) */
	OUT_CLOSED,					/* EOF, close_notify, reset, EPIPE */
	OUT_TLS_ERROR				/* SSL_ERROR_SSL other than EOF */
};

static const char *const outcome_names[] = {
	"ok", "error", "fatal", "closed", "tls_error"
};

static SSL *ssl;
static int	sock = -1;
static int	hold_enabled = 0;
static long preauth_key_updates = 0;
static long long app_bytes_read = 0;
static int	no_startup = 0;
static const char *cipher_list = NULL;
static const char *ciphersuites = NULL;
static const char *next_cipher_list = NULL;
static long every_kb = 64;
static const char *cert_file = NULL;
static const char *key_file = NULL;
static const char *query_text = "SELECT 1";

/* what this client's TLS library did, from its message callback */
static long key_updates_written = 0;
static long key_updates_read = 0;
static long handshakes_completed = 0;

/* incoming bytes not yet consumed */
static unsigned char *inbuf;
static size_t inbuf_len;
static size_t inbuf_cap;

/* results of the last query */
struct qres
{
	long		datarows;
	long long	datarow_bytes;	/* column values, summed */
	char		first_row[256];
	char		tag[128];
	char		error[256];
};

static void
say(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

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

/* Put a string on one line: no newlines, bounded. */
static void
oneline(char *dst, size_t cap, const char *src, size_t len)
{
	size_t		n = 0;

	for (size_t i = 0; i < len && n + 1 < cap; i++)
	{
		char		c = src[i];

		dst[n++] = (c == '\n' || c == '\r' || c == '\0') ? ' ' : c;
	}
	dst[n] = '\0';
}

/*
 * Classify a failed SSL call.  Prints "io_error=WHAT:DETAIL" and returns
 * OUT_CLOSED or OUT_TLS_ERROR.
 */
static enum outcome
ssl_failure(int ret, const char *what)
{
	int			err = SSL_get_error(ssl, ret);
	int			saved_errno = errno;
	unsigned long e = ERR_peek_error();
	char		detail[256];
	enum outcome kind;

	detail[0] = '\0';
	switch (err)
	{
		case SSL_ERROR_ZERO_RETURN:
			snprintf(detail, sizeof(detail), "close_notify");
			kind = OUT_CLOSED;
			break;
		case SSL_ERROR_SYSCALL:
			if (e != 0)
			{
				ERR_error_string_n(e, detail, sizeof(detail));
				kind = OUT_TLS_ERROR;
			}
			else if (ret == 0 || saved_errno == 0)
			{
				snprintf(detail, sizeof(detail), "eof");
				kind = OUT_CLOSED;
			}
			else
			{
				snprintf(detail, sizeof(detail), "%s", strerror(saved_errno));
				kind = (saved_errno == EPIPE || saved_errno == ECONNRESET ||
						saved_errno == ENOTCONN) ? OUT_CLOSED : OUT_TLS_ERROR;
			}
			break;
		case SSL_ERROR_SSL:
			ERR_error_string_n(e, detail, sizeof(detail));
			kind = (ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
				? OUT_CLOSED : OUT_TLS_ERROR;
			break;
		default:
			snprintf(detail, sizeof(detail), "SSL_get_error=%d", err);
			kind = OUT_TLS_ERROR;
			break;
	}
	ERR_clear_error();
	say("io_error=%s:%s", what, detail);
	return kind;
}

static enum outcome
write_all(const void *buf, size_t len, const char *what)
{
	const unsigned char *p = buf;

	while (len > 0)
	{
		int			n;

		ERR_clear_error();
		errno = 0;
		n = SSL_write(ssl, p, (int) len);
		if (n <= 0)
			return ssl_failure(n, what);
		p += n;
		len -= (size_t) n;
	}
	return OUT_OK;
}

/* Read at least one more byte into inbuf. */
static enum outcome
read_more(void)
{
	int			n;

	if (inbuf_cap - inbuf_len < 16384)
	{
		inbuf_cap = inbuf_cap * 2 + 65536;
		inbuf = realloc(inbuf, inbuf_cap);
		if (inbuf == NULL)
		{
			say("result=tls_error");
			say("detail=out of memory");
			exit(2);
		}
	}
	ERR_clear_error();
	errno = 0;
	n = SSL_read(ssl, inbuf + inbuf_len, (int) (inbuf_cap - inbuf_len));
	if (n <= 0)
		return ssl_failure(n, "read");
	inbuf_len += (size_t) n;
	app_bytes_read += n;
	return OUT_OK;
}

static uint32_t
get32(const unsigned char *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) |
		((uint32_t) p[2] << 8) | (uint32_t) p[3];
}

static void
put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char) (v >> 24);
	p[1] = (unsigned char) (v >> 16);
	p[2] = (unsigned char) (v >> 8);
	p[3] = (unsigned char) v;
}

/*
 * Next backend message: *type, and its body copied to a malloc'd *body of
 * *len bytes (caller frees).
 */
static enum outcome
read_msg(char *type, unsigned char **body, size_t *len)
{
	uint32_t	mlen;
	enum outcome o;

	while (inbuf_len < 5)
		if ((o = read_more()) != OUT_OK)
			return o;
	mlen = get32(inbuf + 1);
	if (mlen < 4 || mlen > 64u * 1024 * 1024)
	{
		say("io_error=protocol:bad message length %u", mlen);
		return OUT_TLS_ERROR;
	}
	while (inbuf_len < 1 + (size_t) mlen)
		if ((o = read_more()) != OUT_OK)
			return o;
	*type = (char) inbuf[0];
	*len = mlen - 4;
	*body = malloc(*len + 1);
	if (*body == NULL)
		exit(2);
	memcpy(*body, inbuf + 5, *len);
	(*body)[*len] = '\0';
	memmove(inbuf, inbuf + 1 + mlen, inbuf_len - 1 - mlen);
	inbuf_len -= 1 + mlen;
	return OUT_OK;
}

/* ErrorResponse: severity and message; returns 1 if FATAL or PANIC. */
static int
parse_error(const unsigned char *body, size_t len, char *out, size_t cap)
{
	const char *sev = "";
	const char *msg = "";
	size_t		i = 0;
	char		buf[512];

	while (i < len && body[i] != 0)
	{
		char		field = (char) body[i++];
		const char *val = (const char *) body + i;

		if (field == 'V' || (field == 'S' && sev[0] == '\0'))
			sev = val;
		else if (field == 'M')
			msg = val;
		i += strlen(val) + 1;
	}
	snprintf(buf, sizeof(buf), "%s: %s", sev, msg);
	oneline(out, cap, buf, strlen(buf));
	return strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0;
}

/* Read backend messages until ReadyForQuery (or the end). */
static enum outcome
read_until_ready(struct qres *r, char stop_at)
{
	int			had_error = 0;
	int			had_fatal = 0;

	for (;;)
	{
		char		type;
		unsigned char *body;
		size_t		len;
		enum outcome o = read_msg(&type, &body, &len);

		if (o != OUT_OK)
			return had_fatal ? OUT_FATAL : o;

		switch (type)
		{
			case 'D':
				{
					size_t		i = 2;
					unsigned	ncols = len >= 2 ? (unsigned) ((body[0] << 8) | body[1]) : 0;
					char		row[256];
					size_t		rl = 0;

					for (unsigned c = 0; c < ncols && i + 4 <= len; c++)
					{
						int32_t		cl = (int32_t) get32(body + i);

						i += 4;
						if (c > 0 && rl + 1 < sizeof(row))
							row[rl++] = '|';
						if (cl > 0)
						{
							size_t		take = (size_t) cl;

							r->datarow_bytes += cl;
							if (take > len - i)
								take = len - i;
							if (take > sizeof(row) - 1 - rl)
								take = sizeof(row) - 1 - rl;
							memcpy(row + rl, body + i, take);
							rl += take;
							i += (size_t) cl;
						}
					}
					row[rl] = '\0';
					if (r->datarows++ == 0)
						oneline(r->first_row, sizeof(r->first_row), row, rl);
					break;
				}
			case 'C':
				oneline(r->tag, sizeof(r->tag), (const char *) body, strnlen((const char *) body, len));
				break;
			case 'E':
				if (parse_error(body, len, r->error, sizeof(r->error)))
					had_fatal = 1;
				had_error = 1;
				say("server_error=%s", r->error);
				break;
			default:
				break;
		}
		free(body);
		if (type == 'Z' || (stop_at != 0 && type == stop_at))
			return had_fatal ? OUT_FATAL : had_error ? OUT_ERROR : OUT_OK;
	}
}

static enum outcome
send_query(const char *sql)
{
	size_t		sl = strlen(sql) + 1;
	unsigned char *m = malloc(5 + sl);
	enum outcome o;

	if (m == NULL)
		exit(2);
	m[0] = 'Q';
	put32(m + 1, (uint32_t) (4 + sl));
	memcpy(m + 5, sql, sl);
	o = write_all(m, 5 + sl, "write_query");
	free(m);
	return o;
}

/* Send a query, read its whole answer, report it with prefix. */
static enum outcome
run_query(const char *sql, const char *prefix, struct qres *r)
{
	enum outcome o;

	memset(r, 0, sizeof(*r));
	app_bytes_read = 0;
	o = send_query(sql);
	if (o == OUT_OK)
		o = read_until_ready(r, 0);
	say("%s_result=%s", prefix, outcome_names[o]);
	say("%s_app_bytes_read=%lld", prefix, app_bytes_read);
	if (r->datarows > 0 || o == OUT_OK)
	{
		say("%s_datarows=%ld", prefix, r->datarows);
		say("%s_datarow_bytes=%lld", prefix, r->datarow_bytes);
		if (r->datarow_bytes <= 200)
			say("%s_row=%s", prefix, r->first_row);
	}
	if (r->tag[0])
		say("%s_tag=%s", prefix, r->tag);
	return o;
}

static void
hold(const char *name)
{
	char		line[64];

	if (!hold_enabled)
		return;
	say("hold=%s", name);
	if (fgets(line, sizeof(line), stdin) == NULL)
	{
		/* stdin closed: go on */
	}
}

static void
set_blocking(int blocking)
{
	int			fl = fcntl(sock, F_GETFL);

	if (fl >= 0)
		(void) fcntl(sock, F_SETFL, blocking ? (fl & ~O_NONBLOCK) : (fl | O_NONBLOCK));
}

/* Count KeyUpdate messages both ways. */
static void
on_tls_message(int write_p, int version, int content_type, const void *buf,
			   size_t len, SSL *s, void *arg)
{
	const unsigned char *p = buf;

	(void) version;
	(void) s;
	(void) arg;
	if (content_type == SSL3_RT_HANDSHAKE && len >= 1 && p[0] == SSL3_MT_KEY_UPDATE)
	{
		if (write_p)
			key_updates_written++;
		else
			key_updates_read++;
	}
}

/* Count completed handshakes (the first, and each renegotiation). */
static void
on_tls_info(const SSL *s, int where, int ret)
{
	(void) s;
	(void) ret;
	if (where & SSL_CB_HANDSHAKE_DONE)
		handshakes_completed++;
}

/* The kernel's counts for our socket. */
static void
say_tcp_counts(void)
{
	struct tcp_info ti;
	socklen_t	tl = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0)
	{
		say("tcp_info=unavailable:%s", strerror(errno));
		return;
	}
	say("tcp_bytes_received=%llu", (unsigned long long) ti.tcpi_bytes_received);
	say("tcp_bytes_acked=%llu", (unsigned long long) ti.tcpi_bytes_acked);
}

static void
say_tls_counts(void)
{
	say("key_updates_sent_total=%ld", key_updates_written);
	say("key_updates_received_total=%ld", key_updates_read);
	say("renegotiations_completed=%ld",
		handshakes_completed > 0 ? handshakes_completed - 1 : 0);
}

static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */

static int
connect_and_start(const char *host, int port, const char *user,
				  const char *db, const char *tls, long extra_options)
{
	struct sockaddr_in sa;
	unsigned char req[8];
	char		answer;
	SSL_CTX    *ctx;
	int			version = strcmp(tls, "1.2") == 0 ? TLS1_2_VERSION : TLS1_3_VERSION;
	unsigned char startup[512];
	size_t		sl;
	int			one = 1;
	int			r;
	struct qres dummy;

	sock = socket(AF_INET, SOCK_STREAM, 0);
	if (sock < 0)
	{
		say("result=closed");
		say("detail=socket: %s", strerror(errno));
		return -1;
	}
	(void) setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t) port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
	{
		say("detail=bad host %s (an IPv4 address is needed)", host);
		say("result=error");
		return -1;
	}
	if (connect(sock, (struct sockaddr *) &sa, sizeof(sa)) != 0)
	{
		say("result=closed");
		say("detail=connect: %s", strerror(errno));
		return -1;
	}
	{
		struct sockaddr_in local;
		socklen_t	ll = sizeof(local);

		if (getsockname(sock, (struct sockaddr *) &local, &ll) == 0)
			say("client_port=%u", (unsigned) ntohs(local.sin_port));
	}

	/* SSLRequest */
	put32(req, 8);
	put32(req + 4, 80877103);
	if (write(sock, req, sizeof(req)) != (ssize_t) sizeof(req) ||
		read(sock, &answer, 1) != 1 || answer != 'S')
	{
		say("result=closed");
		say("detail=SSLRequest refused");
		return -1;
	}

	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL ||
		!SSL_CTX_set_min_proto_version(ctx, version) ||
		!SSL_CTX_set_max_proto_version(ctx, version))
	{
		say("detail=SSL_CTX set-up failed");
		say("result=tls_error");
		return -1;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_options(ctx, (uint64_t) extra_options);
	SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
	SSL_CTX_set_msg_callback(ctx, on_tls_message);
	SSL_CTX_set_info_callback(ctx, on_tls_info);
	if (cert_file != NULL &&
		(SSL_CTX_use_certificate_file(ctx, cert_file, SSL_FILETYPE_PEM) != 1 ||
		 SSL_CTX_use_PrivateKey_file(ctx, key_file ? key_file : cert_file,
									 SSL_FILETYPE_PEM) != 1))
	{
		say("detail=client certificate %s refused", cert_file);
		say("result=tls_error");
		return -1;
	}
	if (ciphersuites != NULL && !SSL_CTX_set_ciphersuites(ctx, ciphersuites))
	{
		say("detail=ciphersuites %s refused", ciphersuites);
		say("result=tls_error");
		return -1;
	}
	if (cipher_list != NULL && !SSL_CTX_set_cipher_list(ctx, cipher_list))
	{
		say("detail=cipher list %s refused", cipher_list);
		say("result=tls_error");
		return -1;
	}
	ssl = SSL_new(ctx);
	if (ssl == NULL || !SSL_set_fd(ssl, sock))
	{
		say("detail=SSL_new failed");
		say("result=tls_error");
		return -1;
	}
	ERR_clear_error();
	r = SSL_connect(ssl);
	if (r != 1)
	{
		say("result=%s", outcome_names[ssl_failure(r, "handshake")]);
		return -1;
	}
	say("tls_version=%s", SSL_get_version(ssl));
	say("cipher=%s", SSL_get_cipher_name(ssl));
	if (next_cipher_list != NULL && !SSL_set_cipher_list(ssl, next_cipher_list))
	{
		say("detail=cipher list %s refused", next_cipher_list);
		say("result=tls_error");
		return -1;
	}

	/* KeyUpdates before the StartupMessage: before authentication */
	if (preauth_key_updates > 0)
	{
		long		sent = 0;

		for (long i = 0; i < preauth_key_updates; i++)
		{
			ERR_clear_error();
			if (!SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED))
				break;
			errno = 0;
			r = SSL_do_handshake(ssl);
			if (r != 1)
			{
				(void) ssl_failure(r, "send_preauth_key_update");
				break;
			}
			sent++;
		}
		say("preauth_key_updates_sent=%ld", sent);
	}
	if (no_startup)
		return 0;

	/* StartupMessage */
	sl = 8;
	sl += (size_t) snprintf((char *) startup + sl, sizeof(startup) - sl - 2,
							"user%c%s%cdatabase%c%s%capplication_name%chostile_peer%c",
							0, user, 0, 0, db, 0, 0, 0);
	startup[sl++] = 0;
	put32(startup, (uint32_t) sl);
	put32(startup + 4, 196608);
	if (write_all(startup, sl, "write_startup") != OUT_OK)
	{
		say("result=closed");
		return -1;
	}

	/* up to ReadyForQuery: pick up our backend's pid on the way */
	for (;;)
	{
		char		type;
		unsigned char *body;
		size_t		len;
		enum outcome o = read_msg(&type, &body, &len);

		if (o != OUT_OK)
		{
			say("result=%s", outcome_names[o]);
			return -1;
		}
		if (type == 'R' && len >= 4 && get32(body) != 0)
		{
			say("detail=authentication method %u requested; trust is needed", get32(body));
			say("result=error");
			free(body);
			return -1;
		}
		if (type == 'K' && len >= 4)
			say("pid=%u", get32(body));
		if (type == 'E')
		{
			memset(&dummy, 0, sizeof(dummy));
			parse_error(body, len, dummy.error, sizeof(dummy.error));
			say("server_error=%s", dummy.error);
			say("result=fatal");
			free(body);
			return -1;
		}
		free(body);
		if (type == 'Z')
			break;
	}
	say("ready=1");
	return 0;
}

/* ------------------------------------------------------------------ */

/* N KeyUpdates in a row, then one query. */
static enum outcome
mode_keyupdate_flood(long n, int type)
{
	long		sent = 0;
	enum outcome o = OUT_OK;
	struct qres r;

	for (long i = 0; i < n; i++)
	{
		int			ret;

		ERR_clear_error();
		if (!SSL_key_update(ssl, type))
		{
			char		detail[256];

			ERR_error_string_n(ERR_peek_error(), detail, sizeof(detail));
			say("io_error=key_update:%s", detail);
			o = OUT_TLS_ERROR;
			break;
		}
		errno = 0;
		ret = SSL_do_handshake(ssl);
		if (ret != 1)
		{
			o = ssl_failure(ret, "send_key_update");
			break;
		}
		sent++;
	}
	say("key_updates_sent=%ld", sent);
	if (o != OUT_OK)
		return o;
	return run_query("SELECT 1", "query", &r);
}

/*
 * A backlog: send a query that keeps the server busy (it waits for an
 * advisory lock the test holds), then as many of n KeyUpdates in a row as
 * the socket buffers take without blocking, and hold ("flooded") so that
 * the test can release the lock.  The server then finds them all queued
 * when it next reads.  Then read the query's answer and try "SELECT 1".
 */
static enum outcome
mode_keyupdate_backlog(long n)
{
	long		queued = 0;
	int			pending = 0;
	enum outcome o;
	struct qres r;

	o = send_query("SELECT pg_advisory_lock(4242), pg_advisory_unlock(4242)");
	if (o != OUT_OK)
		return o;

	set_blocking(0);
	for (long i = 0; i < n; i++)
	{
		int			ret;

		ERR_clear_error();
		if (!SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED))
			break;
		errno = 0;
		ret = SSL_do_handshake(ssl);
		if (ret == 1)
		{
			queued++;
			continue;
		}
		if (SSL_get_error(ssl, ret) == SSL_ERROR_WANT_WRITE)
		{
			pending = 1;		/* part of it is out: finish it later */
			break;
		}
		set_blocking(1);
		o = ssl_failure(ret, "send_key_update");
		say("key_updates_queued=%ld", queued);
		return o;
	}
	say("key_updates_queued=%ld", queued);
	say("socket_full=%d", pending);
	hold("flooded");
	set_blocking(1);
	if (pending)
	{
		int			ret;

		ERR_clear_error();
		errno = 0;
		ret = SSL_do_handshake(ssl);
		if (ret != 1)
			return ssl_failure(ret, "send_key_update");
	}

	memset(&r, 0, sizeof(r));
	o = read_until_ready(&r, 0);
	say("lock_query_result=%s", outcome_names[o]);
	if (o != OUT_OK)
		return o;
	return run_query("SELECT 1", "query", &r);
}

/* N times: a KeyUpdate, then a query and its whole answer. */
static enum outcome
mode_keyupdate_spaced(long n)
{
	long		sent = 0;
	long		answered = 0;
	enum outcome o = OUT_OK;
	struct qres r;

	for (long i = 0; i < n && o == OUT_OK; i++)
	{
		int			ret;

		ERR_clear_error();
		if (!SSL_key_update(ssl, SSL_KEY_UPDATE_NOT_REQUESTED))
		{
			say("io_error=key_update:refused");
			o = OUT_TLS_ERROR;
			break;
		}
		errno = 0;
		ret = SSL_do_handshake(ssl);
		if (ret != 1)
		{
			o = ssl_failure(ret, "send_key_update");
			break;
		}
		sent++;
		memset(&r, 0, sizeof(r));
		o = send_query("SELECT 1");
		if (o == OUT_OK)
			o = read_until_ready(&r, 0);
		if (o == OUT_OK && r.datarows == 1 && strcmp(r.first_row, "1") == 0)
			answered++;
	}
	say("key_updates_sent=%ld", sent);
	say("queries_answered=%ld", answered);
	return o;
}

/* COPY <table> FROM STDIN, up to CopyInResponse. */
static enum outcome
start_copy(const char *table)
{
	char		sql[256];
	struct qres r;
	enum outcome o;

	snprintf(sql, sizeof(sql), "COPY %s FROM STDIN", table);
	memset(&r, 0, sizeof(r));
	o = send_query(sql);
	if (o == OUT_OK)
		o = read_until_ready(&r, 'G');
	say("copy_started=%d", o == OUT_OK);
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
	put32(msg + 1, 4 + COPY_ROW_BYTES);
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
	put32(done + 1, 4);
	o = write_all(done, sizeof(done), "write_copydone");
	say("copy_done_sent=%d", o == OUT_OK);
	if (o != OUT_OK)
		return o;

	memset(&r, 0, sizeof(r));
	o = read_until_ready(&r, 0);
	say("copy_result=%s", outcome_names[o]);
	if (r.tag[0])
		say("copy_tag=%s", r.tag);
	return o;
}

/* Our own KeyUpdate, sent now. */
static enum outcome
send_key_update(int type)
{
	int			ret;

	ERR_clear_error();
	if (!SSL_key_update(ssl, type))
	{
		say("io_error=key_update:refused");
		return OUT_TLS_ERROR;
	}
	errno = 0;
	ret = SSL_do_handshake(ssl);
	if (ret != 1)
		return ssl_failure(ret, "send_key_update");
	return OUT_OK;
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
 * cannot fail a write of ours still under way.
 */
static enum outcome
mode_never_answer(long mb, const char *table, long stall_kb)
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
		o = write_all(msg, 5 + COPY_ROW_BYTES, "write_copydata");
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
		put32(part + 1, 4 + 1024 * 1024);
		o = write_all(part, first, "write_partial_copydata");
		if (o == OUT_OK)
			o = write_all(part + first - last, last, "write_partial_copydata");
		if (o == OUT_OK)
			sent_bytes += first + last;
		free(part);
	}
	free(msg);
	say("copy_rows_sent=%ld", sent_rows);
	say("copy_bytes_sent=%lld", sent_bytes);
	if (o == OUT_OK && stall_kb > 0)
	{
		say("stalled=1");
		hold("stalled");

		/*
		 * Still up?  A server that ended the session has closed the
		 * socket: a read says so (without blocking: data may be absent).
		 */
		set_blocking(0);
		ERR_clear_error();
		{
			char		c;
			int			n = SSL_read(ssl, &c, 1);
			int			err = SSL_get_error(ssl, n);

			if (n > 0 || err == SSL_ERROR_WANT_READ)
			{
				say("after_stall=open");
				o = OUT_OK;
			}
			else
				o = ssl_failure(n, "after_stall");
		}
		say("copy_done_sent=0");
		say("result=%s", o == OUT_OK ? "stalled" : outcome_names[o]);
		close(sock);
		exit(0);
	}
	if (o != OUT_OK)
	{
		say("copy_done_sent=0");
		return o;
	}

	return finish_copy();
}

/* TLS 1.2: a client-initiated renegotiation, then a query. */
static enum outcome
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
	 * Without a hold, SSL_do_handshake sends the ClientHello and then
	 * blocks for the answer.  With one, send the ClientHello only, let the
	 * test look at the server, then read: meanwhile OpenSSL reads from an
	 * empty memory BIO (so it cannot see the server's answer yet) and
	 * writes to the socket.
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
static enum outcome
mode_refuse_renegotiation(long bytes)
{
	char		sql[128];
	struct qres r;

	snprintf(sql, sizeof(sql), "SELECT repeat('x', %ld)", bytes);
	return run_query(sql, "query", &r);
}

/* SELECT repeat('x', bytes); then the cipher in force. */
static enum outcome
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
 * A Query message of n bytes, one byte per record, a KeyUpdate before
 * each: never two KeyUpdates in a row, yet one per byte.
 */
static enum outcome
mode_keyupdate_interleaved(long n)
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
	put32(m + 1, (uint32_t) (len - 1));
	memcpy(m + 5, "SELECT 1 --", 11);
	memset(m + 16, 'x', len - 17);
	m[len - 1] = '\0';

	for (size_t i = 0; i < len && o == OUT_OK; i++)
	{
		o = send_key_update(SSL_KEY_UPDATE_NOT_REQUESTED);
		if (o == OUT_OK)
		{
			sent++;
			o = write_all(m + i, 1, "write_query_byte");
		}
	}
	free(m);
	say("key_updates_sent=%ld", sent);
	if (o != OUT_OK)
		return o;
	memset(&r, 0, sizeof(r));
	o = read_until_ready(&r, 0);
	say("query_result=%s", outcome_names[o]);
	if (r.datarows > 0)
		say("query_row=%s", r.first_row);
	return o;
}

/* COPY FROM of mb megabytes, our KeyUpdate every every_kb kB. */
static enum outcome
mode_copy_keyupdates(long mb, const char *table)
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
		o = write_all(msg, 5 + COPY_ROW_BYTES, "write_copydata");
		since_update += 5 + COPY_ROW_BYTES;
		if (o == OUT_OK && since_update >= every_kb * 1024)
		{
			o = send_key_update(SSL_KEY_UPDATE_NOT_REQUESTED);
			since_update = 0;
			sent += o == OUT_OK;
		}
	}
	free(msg);
	say("key_updates_sent=%ld", sent);
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
static enum outcome
mode_copy_answering(long seconds, const char *table)
{
	enum outcome o;
	unsigned char *msg;
	double		start = now_seconds();
	long		rows = 0;

	if ((o = start_copy(table)) != OUT_OK)
		return o;
	msg = copy_row_message();
	while (o == OUT_OK && now_seconds() - start < seconds)
	{
		char		c;
		int			n;

		o = write_all(msg, 5 + COPY_ROW_BYTES, "write_copydata");
		if (o != OUT_OK)
			break;
		rows++;
		usleep(5000);

		set_blocking(0);
		ERR_clear_error();
		n = SSL_peek(ssl, &c, 1);
		if (n <= 0 && SSL_get_error(ssl, n) != SSL_ERROR_WANT_READ)
			o = ssl_failure(n, "poll");
		else if (n > 0)
		{
			say("io_error=poll:the server answered during COPY");
			o = OUT_ERROR;
		}
		set_blocking(1);
	}
	free(msg);
	say("copy_rows_sent=%ld", rows);
	say("copy_seconds=%.3f", now_seconds() - start);
	if (o != OUT_OK)
		return o;
	return finish_copy();
}

/*
 * A query with a large answer, then nothing read for as long as the test
 * holds us: the server's HelloRequest waits unread.
 */
static enum outcome
mode_late_reader(long rows)
{
	char		sql[128];
	struct qres r;
	enum outcome o;

	snprintf(sql, sizeof(sql),
			 "SELECT repeat('x', 70000) FROM generate_series(1, %ld)", rows);
	memset(&r, 0, sizeof(r));
	if ((o = send_query(sql)) != OUT_OK)
		return o;
	hold("query_sent");
	o = read_until_ready(&r, 0);
	say("late_result=%s", outcome_names[o]);
	say("late_datarows=%ld", r.datarows);
	say("late_datarow_bytes=%lld", r.datarow_bytes);
	if (o != OUT_OK)
		return o;
	return run_query("SELECT 1", "query", &r);
}

/*
 * --query, padded with a comment to pad bytes, then nothing read for as
 * long as the test holds us.
 */
static enum outcome
mode_hold_before_reading(long pad)
{
	size_t		ql = strlen(query_text);
	size_t		len = (size_t) pad > ql + 8 ? (size_t) pad : ql + 8;
	char	   *sql = malloc(len + 1);
	struct qres r;
	enum outcome o;

	if (sql == NULL)
		exit(2);
	memcpy(sql, query_text, ql);
	memcpy(sql + ql, " --", 3);
	memset(sql + ql + 3, 'x', len - ql - 3);
	sql[len] = '\0';
	o = send_query(sql);
	free(sql);
	if (o != OUT_OK)
		return o;
	hold("query_sent");
	memset(&r, 0, sizeof(r));
	o = read_until_ready(&r, 0);
	say("held_result=%s", outcome_names[o]);
	if (r.datarows > 0)
		say("held_row=%s", r.first_row);
	if (o != OUT_OK)
		return o;
	return run_query("SELECT 1", "query", &r);
}

/* Idle for as long as the test holds us, then two queries. */
static enum outcome
mode_idle_then_query(void)
{
	struct qres r;
	enum outcome o;

	hold("idle");
	o = run_query("SELECT 1", "first", &r);
	if (o != OUT_OK)
		return o;
	return run_query("SELECT 1", "query", &r);
}

/* After the handshake: nothing, until the server gives up on us. */
static enum outcome
mode_silence(void)
{
	char		c;
	int			n;
	enum outcome o;

	hold("silent");
	ERR_clear_error();
	errno = 0;
	n = SSL_read(ssl, &c, 1);
	o = n > 0 ? OUT_ERROR : ssl_failure(n, "silence");
	say_tcp_counts();
	return o;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: hostile_peer --port P [--host H] [--user U] [--db D] [--tls 1.2|1.3]\n"
			"                    [--table T] [--hold] [--preauth-key-updates N] [--no-startup]\n"
			"                    [--cipher LIST] [--next-cipher LIST] [--every-kb K]\n"
			"                    [--cert FILE --key FILE] [--query SQL] [--ciphersuites LIST]\n"
			"                    MODE [ARG]\n"
			"modes: keyupdate-flood N | keyupdate-requested-flood N | keyupdate-spaced N |\n"
			"       keyupdate-backlog N |\n"
			"       never-answer MB | stall-after KB | renegotiate |\n"
			"       refuse-renegotiation [BYTES] | read-large BYTES |\n"
			"       keyupdate-interleaved N | copy-keyupdates MB | copy-answering SECONDS |\n"
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
			hold_enabled = 1;
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
			preauth_key_updates = atol(argv[++i]);
		else if (strcmp(argv[i], "--no-startup") == 0)
			no_startup = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--cipher") == 0)
			cipher_list = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--next-cipher") == 0)
			next_cipher_list = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--every-kb") == 0)
			every_kb = atol(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--cert") == 0)
			cert_file = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--key") == 0)
			key_file = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--query") == 0)
			query_text = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--ciphersuites") == 0)
			ciphersuites = argv[++i];
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
	if (strlen(user) > 100 || strlen(db) > 100 || strlen(table) > 100)
		usage();

	if (strcmp(mode, "refuse-renegotiation") == 0)
		extra_options |= (long) SSL_OP_NO_RENEGOTIATION;

	say("mode=%s", mode);
	if (connect_and_start(host, port, user, db, tls, extra_options) != 0)
		return 2;

	if (strcmp(mode, "keyupdate-flood") == 0 && arg >= 0)
		o = mode_keyupdate_flood(arg, SSL_KEY_UPDATE_NOT_REQUESTED);
	else if (strcmp(mode, "keyupdate-requested-flood") == 0 && arg >= 0)
		o = mode_keyupdate_flood(arg, SSL_KEY_UPDATE_REQUESTED);
	else if (strcmp(mode, "keyupdate-backlog") == 0 && arg >= 0)
		o = mode_keyupdate_backlog(arg);
	else if (strcmp(mode, "keyupdate-spaced") == 0 && arg >= 0)
		o = mode_keyupdate_spaced(arg);
	else if (strcmp(mode, "never-answer") == 0 && arg > 0)
		o = mode_never_answer(arg, table, 0);
	else if (strcmp(mode, "stall-after") == 0 && arg > 0)
		o = mode_never_answer(0, table, arg);
	else if (strcmp(mode, "renegotiate") == 0)
		o = mode_renegotiate();
	else if (strcmp(mode, "refuse-renegotiation") == 0)
		o = mode_refuse_renegotiation(arg > 0 ? arg : 300000);
	else if (strcmp(mode, "read-large") == 0 && arg > 0)
		o = mode_read_large(arg);
	else if (strcmp(mode, "keyupdate-interleaved") == 0 && arg > 0)
		o = mode_keyupdate_interleaved(arg);
	else if (strcmp(mode, "copy-keyupdates") == 0 && arg > 0 && every_kb > 0)
		o = mode_copy_keyupdates(arg, table);
	else if (strcmp(mode, "copy-answering") == 0 && arg > 0)
		o = mode_copy_answering(arg, table);
	else if (strcmp(mode, "late-reader") == 0 && arg > 0)
		o = mode_late_reader(arg);
	else if (strcmp(mode, "hold-before-reading") == 0 && arg > 0)
		o = mode_hold_before_reading(arg);
	else if (strcmp(mode, "idle-then-query") == 0)
		o = mode_idle_then_query();
	else if (strcmp(mode, "silence") == 0 && no_startup)
	{
		o = mode_silence();
		say_tls_counts();
		say("result=%s", outcome_names[o]);
		close(sock);
		return 0;
	}
	else
		usage();

	if (o == OUT_OK || o == OUT_ERROR)
	{
		unsigned char term[5];

		hold("end");
		term[0] = 'X';
		put32(term + 1, 4);
		(void) write_all(term, sizeof(term), "write_terminate");
		ERR_clear_error();
		(void) SSL_shutdown(ssl);
	}
	say_tls_counts();
	say("result=%s", outcome_names[o]);
	close(sock);
	return 0;
}

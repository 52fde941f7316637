/*
 * gnutls_copy.c -- a PostgreSQL client over GnuTLS, for test/t/025_gnutls_rustls.pl
 *
 * Speaks the frontend/backend protocol v3 itself: SSLRequest, a GnuTLS
 * session restricted to TLS 1.3 or TLS 1.2 (--tls), a startup packet, trust
 * or cleartext-password authentication.  Then, in one session, in this
 * order, whichever were asked for:
 *
 *   --copy-out ROWS   COPY (SELECT i, md5(i::text) || repeat('x', FILLER)
 *                     FROM generate_series(1, ROWS) i) TO STDOUT, the MD5
 *                     of the bytes received computed here (SslrTest's
 *                     series_copy_md5 is the server's);
 *   --copy-in ROWS    COPY TABLE FROM STDIN of the same rows, generated
 *                     here, with their MD5 (SslrTest's table_copy_md5);
 *                     while sending, whatever the server sent (a KeyUpdate
 *                     request, a HelloRequest) is read as soon as it is
 *                     there, as a careful client would;
 *   --long QUERIES    that many small queries, each sending PAYLOAD bytes
 *                     and receiving PAYLOAD bytes, PAUSE ms apart.
 *
 * It counts the TLS 1.3 KeyUpdates it received and sent (a handshake hook
 * on GNUTLS_HANDSHAKE_KEY_UPDATE) and the TLS 1.2 renegotiations it took
 * part in (GNUTLS_E_REHANDSHAKE: gnutls_handshake again).  It prints one
 * JSON line at the end ("phase":"final"); with --hold, once the work is
 * done, it first prints the same line with "phase":"hold" and waits for a
 * line on standard input, so that the server's row can be read while the
 * session is open, then checks that the session still answers (SELECT 1).
 * Exit status 0 when everything worked, 1 otherwise (the line says what,
 * with GnuTLS's own error name).
 *
 * Build: cc -Wall -Wextra -Werror -o gnutls_copy gnutls_copy.c $(pkg-config
 * --cflags --libs gnutls)  (test/t/clients/build.sh does it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* options */
static const char *gc_host = "127.0.0.1";
static const char *gc_port = "5432";
static const char *gc_user = "postgres";
static const char *gc_dbname = "postgres";
static const char *gc_appname = "gnutls_copy";
static const char *gc_password;
static const char *gc_cafile;
static const char *gc_tls = "1.3";
static const char *gc_table = "copy_in";
static long gc_copy_out_rows;
static long gc_copy_in_rows;
static long gc_long_queries;
static long gc_filler = 70;
static long gc_payload = 20000;
static long gc_pause_ms;
static int	gc_hold;

/* state */
static int	gc_fd = -1;
static gnutls_session_t gc_session;
static gnutls_certificate_credentials_t gc_cred;
static int	gc_tls_up;
static long gc_key_updates_received;
static long gc_key_updates_sent;
static long gc_renegotiations;
static long gc_pid = -1;
static struct timespec gc_t0;

/* results */
static char gc_out_md5[33];
static long long gc_out_bytes;
static long gc_out_rows;
static char gc_in_md5[33];
static long long gc_in_bytes;
static long gc_in_rows;
static long gc_queries_done;
static long long gc_long_bytes_in;
static int	gc_alive = -1;

/* the first error: stage, GnuTLS error name (or ours), text */
static const char *gc_stage = "connect";
static char gc_error[64];
static char gc_error_text[1024];
static char gc_server_error[1024];

/* input buffer of decrypted bytes not yet parsed */
static char *gc_in;
static size_t gc_in_len;
static size_t gc_in_cap;
static size_t gc_in_pos;

/* output buffer of protocol bytes not yet sent */
static char *gc_out;
static size_t gc_out_len;
static size_t gc_out_cap;

static void gc_print_json(const char *phase, int ok);

static double
gc_elapsed_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - gc_t0.tv_sec) * 1000.0 + (t.tv_nsec - gc_t0.tv_nsec) / 1e6;
}

/* Records the first error and ends: the final line, exit status 1. */
static void
gc_fail(const char *name, const char *fmt,...)
{
	va_list		ap;

	if (gc_error[0] == '\0')
	{
		snprintf(gc_error, sizeof(gc_error), "%s", name);
		va_start(ap, fmt);
		vsnprintf(gc_error_text, sizeof(gc_error_text), fmt, ap);
		va_end(ap);
	}
	gc_print_json("final", 0);
	exit(1);
}

static void
gc_fail_tls(int ret, const char *what)
{
	const char *name = gnutls_strerror_name(ret);

	gc_fail(name ? name : "GNUTLS_E_UNKNOWN", "%s: %s", what, gnutls_strerror(ret));
}

static void
gc_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void
gc_print_json(const char *phase, int ok)
{
	FILE	   *f = stdout;
	const char *version = "";
	const char *cipher = "";

	if (gc_tls_up)
	{
		version = gnutls_protocol_get_name(gnutls_protocol_get_version(gc_session));
		cipher = gnutls_cipher_get_name(gnutls_cipher_get(gc_session));
	}
	fprintf(f, "{\"client\":\"gnutls\",\"library\":\"GnuTLS %s\",\"phase\":\"%s\",\"ok\":%s",
			gnutls_check_version(NULL), phase, ok ? "true" : "false");
	fprintf(f, ",\"stage\":");
	gc_json_string(f, gc_stage);
	fprintf(f, ",\"error\":");
	if (gc_error[0])
		gc_json_string(f, gc_error);
	else
		fprintf(f, "null");
	fprintf(f, ",\"error_text\":");
	gc_json_string(f, gc_error_text);
	fprintf(f, ",\"server_error\":");
	gc_json_string(f, gc_server_error);
	fprintf(f, ",\"tls_version\":");
	gc_json_string(f, version ? version : "");
	fprintf(f, ",\"cipher\":");
	gc_json_string(f, cipher ? cipher : "");
	fprintf(f, ",\"pid\":%ld", gc_pid);
	if (gc_copy_out_rows)
		fprintf(f, ",\"out_md5\":\"%s\",\"out_bytes\":%lld,\"out_rows\":%ld",
				gc_out_md5, gc_out_bytes, gc_out_rows);
	if (gc_copy_in_rows)
		fprintf(f, ",\"in_md5\":\"%s\",\"in_bytes\":%lld,\"in_rows\":%ld",
				gc_in_md5, gc_in_bytes, gc_in_rows);
	if (gc_long_queries)
		fprintf(f, ",\"queries\":%ld,\"long_bytes_in\":%lld", gc_queries_done,
				gc_long_bytes_in);
	fprintf(f, ",\"key_updates_received\":%ld,\"key_updates_sent\":%ld,\"renegotiations\":%ld",
			gc_key_updates_received, gc_key_updates_sent, gc_renegotiations);
	fprintf(f, ",\"alive\":%s,\"elapsed_ms\":%.0f}\n",
			gc_alive < 0 ? "null" : gc_alive ? "true" : "false", gc_elapsed_ms());
	fflush(f);
}

/* ---------------------------------------------------------------- TLS */

static int
gc_key_update_hook(gnutls_session_t session, unsigned int htype, unsigned when,
				   unsigned int incoming, const gnutls_datum_t *msg)
{
	(void) session;
	(void) msg;
	if (htype == GNUTLS_HANDSHAKE_KEY_UPDATE && when == GNUTLS_HOOK_POST)
	{
		if (incoming)
			gc_key_updates_received++;
		else
			gc_key_updates_sent++;
	}
	return 0;
}

/*
 * The socket is non-blocking (so that reading what is there during a COPY
 * FROM never waits for application data that will not come): wait until
 * GnuTLS can go on the way it last wanted to.
 */
static void
gc_wait_io(void)
{
	struct pollfd p;

	p.fd = gc_fd;
	p.events = gnutls_record_get_direction(gc_session) ? POLLOUT : POLLIN;
	p.revents = 0;
	(void) poll(&p, 1, 60000);
}

/* Runs (or resumes) a handshake to its end. */
static void
gc_handshake(const char *what)
{
	int			ret;

	for (;;)
	{
		ret = gnutls_handshake(gc_session);
		if (ret == GNUTLS_E_SUCCESS)
			return;
		if (ret == GNUTLS_E_GOT_APPLICATION_DATA)
		{
			/* a renegotiation met data the server sent before it: keep it */
			size_t		room;
			ssize_t		n;

			if (gc_in_cap - gc_in_len < 65536)
			{
				gc_in_cap = gc_in_cap * 2 + 65536;
				gc_in = realloc(gc_in, gc_in_cap);
				if (!gc_in)
					gc_fail("ENOMEM", "out of memory");
			}
			room = gc_in_cap - gc_in_len;
			n = gnutls_record_recv(gc_session, gc_in + gc_in_len, room);
			if (n > 0)
				gc_in_len += (size_t) n;
			else if (n < 0 && gnutls_error_is_fatal((int) n))
				gc_fail_tls((int) n, what);
			continue;
		}
		if (ret == GNUTLS_E_AGAIN || ret == GNUTLS_E_INTERRUPTED)
		{
			gc_wait_io();
			continue;
		}
		if (gnutls_error_is_fatal(ret))
			gc_fail_tls(ret, what);
	}
}

static void
gc_connect(void)
{
	struct addrinfo hints,
			   *res;
	unsigned char ssl_request[8] = {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f};
	char		answer;
	int			ret,
				one = 1;
	const char *prio;
	const char *err_pos = NULL;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(gc_host, gc_port, &hints, &res);
	if (ret != 0)
		gc_fail("EAI", "getaddrinfo: %s", gai_strerror(ret));
	gc_fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
	if (gc_fd < 0 || connect(gc_fd, res->ai_addr, res->ai_addrlen) != 0)
		gc_fail("ECONNECT", "connect to %s:%s: %s", gc_host, gc_port, strerror(errno));
	freeaddrinfo(res);
	setsockopt(gc_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

	/* SSLRequest, then 'S' */
	if (write(gc_fd, ssl_request, sizeof(ssl_request)) != (ssize_t) sizeof(ssl_request))
		gc_fail("EWRITE", "SSLRequest: %s", strerror(errno));
	if (read(gc_fd, &answer, 1) != 1 || answer != 'S')
		gc_fail("ENOSSL", "the server refused the SSLRequest");

	gc_stage = "handshake";
	if ((ret = gnutls_certificate_allocate_credentials(&gc_cred)) < 0)
		gc_fail_tls(ret, "credentials");
	if (gc_cafile &&
		(ret = gnutls_certificate_set_x509_trust_file(gc_cred, gc_cafile, GNUTLS_X509_FMT_PEM)) < 0)
		gc_fail_tls(ret, "CA file");
	if ((ret = gnutls_init(&gc_session, GNUTLS_CLIENT)) < 0)
		gc_fail_tls(ret, "gnutls_init");
	if (strcmp(gc_tls, "1.3") == 0)
		prio = "NORMAL:-VERS-ALL:+VERS-TLS1.3";
	else if (strcmp(gc_tls, "1.2") == 0)
		prio = "NORMAL:-VERS-ALL:+VERS-TLS1.2:%SAFE_RENEGOTIATION";
	else
		gc_fail("EUSAGE", "--tls must be 1.2 or 1.3");
	if ((ret = gnutls_priority_set_direct(gc_session, prio, &err_pos)) < 0)
		gc_fail_tls(ret, "priority string");
	if ((ret = gnutls_credentials_set(gc_session, GNUTLS_CRD_CERTIFICATE, gc_cred)) < 0)
		gc_fail_tls(ret, "gnutls_credentials_set");
	gnutls_server_name_set(gc_session, GNUTLS_NAME_DNS, "localhost", strlen("localhost"));
	if (gc_cafile)
		gnutls_session_set_verify_cert(gc_session, "localhost", 0);
	gnutls_handshake_set_hook_function(gc_session, GNUTLS_HANDSHAKE_KEY_UPDATE,
									   GNUTLS_HOOK_POST, gc_key_update_hook);
	if (fcntl(gc_fd, F_SETFL, fcntl(gc_fd, F_GETFL) | O_NONBLOCK) != 0)
		gc_fail("EFCNTL", "O_NONBLOCK: %s", strerror(errno));
	gnutls_transport_set_int(gc_session, gc_fd);
	gnutls_handshake_set_timeout(gc_session, GNUTLS_DEFAULT_HANDSHAKE_TIMEOUT);
	gc_handshake("handshake");
	gc_tls_up = 1;
}

/*
 * Reads one more piece of decrypted data into gc_in: waits until the
 * server sends some, unless nowait (then returns 0 when there is none, 1
 * otherwise).  A KeyUpdate is taken in passing by GnuTLS; a HelloRequest
 * (TLS 1.2) is answered with a handshake.
 */
static int
gc_fill(int nowait)
{
	ssize_t		n;

	if (gc_in_pos > 0 && gc_in_pos == gc_in_len)
		gc_in_pos = gc_in_len = 0;
	if (gc_in_cap - gc_in_len < 65536)
	{
		if (gc_in_pos > 0)
		{
			memmove(gc_in, gc_in + gc_in_pos, gc_in_len - gc_in_pos);
			gc_in_len -= gc_in_pos;
			gc_in_pos = 0;
		}
		if (gc_in_cap - gc_in_len < 65536)
		{
			gc_in_cap = gc_in_cap * 2 + 65536;
			gc_in = realloc(gc_in, gc_in_cap);
			if (!gc_in)
				gc_fail("ENOMEM", "out of memory");
		}
	}
	for (;;)
	{
		n = gnutls_record_recv(gc_session, gc_in + gc_in_len, gc_in_cap - gc_in_len);
		if (n > 0)
		{
			gc_in_len += (size_t) n;
			return 1;
		}
		if (n == 0)
			gc_fail("EOF", "the server closed the connection");
		if (n == GNUTLS_E_REHANDSHAKE)
		{
			gc_handshake("renegotiation");
			gc_renegotiations++;
			continue;
		}
		if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
		{
			if (nowait)
				return 0;
			gc_wait_io();
			continue;
		}
		if (gnutls_error_is_fatal((int) n))
			gc_fail_tls((int) n, "gnutls_record_recv");
		/* a warning alert or the like: go on reading */
	}
}

/* Reads what the server sent, if anything, without waiting. */
static void
gc_drain_ready(void)
{
	while (gc_fill(1))
		;
}

static void
gc_flush(void)
{
	size_t		off = 0;

	while (off < gc_out_len)
	{
		ssize_t		n = gnutls_record_send(gc_session, gc_out + off, gc_out_len - off);

		if (n > 0)
			off += (size_t) n;
		else if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
			gc_wait_io();
		else
			gc_fail_tls((int) n, "gnutls_record_send");
	}
	gc_out_len = 0;
}

static void
gc_put(const void *p, size_t len)
{
	if (gc_out_cap - gc_out_len < len)
	{
		gc_out_cap = gc_out_cap * 2 + len + 65536;
		gc_out = realloc(gc_out, gc_out_cap);
		if (!gc_out)
			gc_fail("ENOMEM", "out of memory");
	}
	memcpy(gc_out + gc_out_len, p, len);
	gc_out_len += len;
}

static void
gc_put_int32(uint32_t v)
{
	uint32_t	n = htonl(v);

	gc_put(&n, 4);
}

/* A message: type byte (0 for none), length, body. */
static void
gc_put_msg(char type, const void *body, size_t len)
{
	if (type)
		gc_put(&type, 1);
	gc_put_int32((uint32_t) (len + 4));
	gc_put(body, len);
}

/* The next whole message: its type, its body and length. */
static char
gc_get_msg(const char **body, size_t *len)
{
	uint32_t	n;
	char		type;

	for (;;)
	{
		if (gc_in_len - gc_in_pos >= 5)
		{
			memcpy(&n, gc_in + gc_in_pos + 1, 4);
			n = ntohl(n);
			if (n < 4)
				gc_fail("EPROTO", "bad message length %u", n);
			if (gc_in_len - gc_in_pos >= 1 + (size_t) n)
				break;
		}
		(void) gc_fill(0);
	}
	type = gc_in[gc_in_pos];
	*body = gc_in + gc_in_pos + 5;
	*len = n - 4;
	gc_in_pos += 1 + n;
	return type;
}

/* An ErrorResponse's fields as "SEVERITY CODE: message (hint: ...)". */
static void
gc_note_server_error(const char *body, size_t len)
{
	const char *p = body,
			   *end = body + len;
	const char *sev = "",
			   *code = "",
			   *msg = "",
			   *hint = "";

	while (p < end && *p)
	{
		char		f = *p++;
		const char *v = p;

		p += strlen(p) + 1;
		if (f == 'V')
			sev = v;
		else if (f == 'C')
			code = v;
		else if (f == 'M')
			msg = v;
		else if (f == 'H')
			hint = v;
	}
	if (gc_server_error[0] == '\0')
		snprintf(gc_server_error, sizeof(gc_server_error), "%s %s: %s%s%s%s",
				 sev, code, msg, hint[0] ? " (hint: " : "", hint, hint[0] ? ")" : "");
}

/* Reads up to ReadyForQuery; an ErrorResponse fails. */
static void
gc_wait_ready(void)
{
	const char *body;
	size_t		len;
	char		t;
	int			failed = 0;

	while ((t = gc_get_msg(&body, &len)) != 'Z')
	{
		if (t == 'E')
		{
			gc_note_server_error(body, len);
			failed = 1;
		}
	}
	if (failed)
		gc_fail("SERVER_ERROR", "%s", gc_server_error);
}

static void
gc_startup(void)
{
	const char *body;
	size_t		len;
	char		t;

	gc_stage = "startup";
	gc_put_int32(0);			/* length, set below */
	gc_put_int32(196608);
	gc_put("user", 5);
	gc_put(gc_user, strlen(gc_user) + 1);
	gc_put("database", 9);
	gc_put(gc_dbname, strlen(gc_dbname) + 1);
	gc_put("application_name", 17);
	gc_put(gc_appname, strlen(gc_appname) + 1);
	gc_put("", 1);
	{
		uint32_t	n = htonl((uint32_t) gc_out_len);

		memcpy(gc_out, &n, 4);
	}
	gc_flush();
	for (;;)
	{
		t = gc_get_msg(&body, &len);
		if (t == 'R')
		{
			uint32_t	code;

			memcpy(&code, body, 4);
			code = ntohl(code);
			if (code == 0)
				continue;
			if (code == 3)
			{
				const char *pw = gc_password ? gc_password : getenv("PGPASSWORD");

				if (!pw)
					gc_fail("ENOPASSWORD", "the server asks for a password");
				gc_put_msg('p', pw, strlen(pw) + 1);
				gc_flush();
				continue;
			}
			gc_fail("EAUTH", "unsupported authentication request %u", code);
		}
		if (t == 'E')
		{
			gc_note_server_error(body, len);
			gc_fail("SERVER_ERROR", "%s", gc_server_error);
		}
		if (t == 'Z')
			return;
	}
}

static void
gc_query(const char *sql)
{
	gc_put_msg('Q', sql, strlen(sql) + 1);
	gc_flush();
}

static void
gc_get_pid(void)
{
	const char *body;
	size_t		len;
	char		t;

	gc_stage = "pid";
	gc_query("SELECT pg_backend_pid()");
	while ((t = gc_get_msg(&body, &len)) != 'Z')
	{
		if (t == 'D' && len >= 6)
		{
			uint32_t	flen;
			char		buf[32];

			memcpy(&flen, body + 2, 4);
			flen = ntohl(flen);
			if (flen < sizeof(buf) && 6 + flen <= len)
			{
				memcpy(buf, body + 6, flen);
				buf[flen] = '\0';
				gc_pid = strtol(buf, NULL, 10);
			}
		}
		else if (t == 'E')
		{
			gc_note_server_error(body, len);
			gc_fail("SERVER_ERROR", "%s", gc_server_error);
		}
	}
}

static void
gc_hex(const unsigned char *d, char *out)
{
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void
gc_copy_out(void)
{
	char		sql[256];
	gnutls_hash_hd_t h;
	unsigned char d[16];
	const char *body;
	size_t		len;
	char		t;
	int			failed = 0;

	gc_stage = "copy_out";
	if (gnutls_hash_init(&h, GNUTLS_DIG_MD5) < 0)
		gc_fail("EHASH", "no MD5");
	snprintf(sql, sizeof(sql),
			 "COPY (SELECT i, md5(i::text) || repeat('x', %ld) FROM generate_series(1, %ld) i) TO STDOUT",
			 gc_filler, gc_copy_out_rows);
	gc_query(sql);
	while ((t = gc_get_msg(&body, &len)) != 'Z')
	{
		if (t == 'd')
		{
			gnutls_hash(h, body, len);
			gc_out_bytes += (long long) len;
			for (size_t i = 0; i < len; i++)
				gc_out_rows += body[i] == '\n';
		}
		else if (t == 'E')
		{
			gc_note_server_error(body, len);
			failed = 1;
		}
	}
	gnutls_hash_deinit(h, d);
	gc_hex(d, gc_out_md5);
	if (failed)
		gc_fail("SERVER_ERROR", "%s", gc_server_error);
}

static void
gc_copy_in(void)
{
	char		sql[256];
	gnutls_hash_hd_t h;
	unsigned char d[16];
	char	   *row;
	const char *body;
	size_t		len;
	char		t;

	gc_stage = "copy_in";
	row = malloc((size_t) gc_filler + 64);
	if (!row || gnutls_hash_init(&h, GNUTLS_DIG_MD5) < 0)
		gc_fail("ENOMEM", "out of memory");
	snprintf(sql, sizeof(sql), "COPY %s (i, s) FROM STDIN", gc_table);
	gc_query(sql);
	while ((t = gc_get_msg(&body, &len)) != 'G')
	{
		if (t == 'E')
		{
			gc_note_server_error(body, len);
			gc_fail("SERVER_ERROR", "%s", gc_server_error);
		}
	}
	for (long i = 1; i <= gc_copy_in_rows; i++)
	{
		char		num[24];
		unsigned char nd[16];
		int			n = snprintf(num, sizeof(num), "%ld", i);
		int			rl;

		gnutls_hash_fast(GNUTLS_DIG_MD5, num, (size_t) n, nd);
		rl = snprintf(row, 64, "%s\t", num);
		gc_hex(nd, row + rl);
		rl += 32;
		memset(row + rl, 'x', (size_t) gc_filler);
		rl += (int) gc_filler;
		row[rl++] = '\n';
		gnutls_hash(h, row, (size_t) rl);
		gc_put_msg('d', row, (size_t) rl);
		gc_in_bytes += rl;
		gc_in_rows++;
		if (gc_out_len >= 65536)
		{
			gc_flush();
			/* a KeyUpdate request or a HelloRequest: take it now */
			gc_drain_ready();
		}
	}
	gc_put_msg('c', "", 0);
	gc_flush();
	gnutls_hash_deinit(h, d);
	gc_hex(d, gc_in_md5);
	free(row);
	gc_wait_ready();
}

static void
gc_long(void)
{
	char	   *sql = malloc((size_t) gc_payload + 128);
	int			n;

	gc_stage = "long";
	if (!sql)
		gc_fail("ENOMEM", "out of memory");
	for (long q = 0; q < gc_long_queries; q++)
	{
		const char *body;
		size_t		len;
		char		t;
		int			failed = 0;

		n = snprintf(sql, 128, "SELECT length('");
		memset(sql + n, 'q', (size_t) gc_payload);
		snprintf(sql + n + gc_payload, (size_t) (128 - n), "'), repeat('r', %ld)", gc_payload);
		gc_query(sql);
		while ((t = gc_get_msg(&body, &len)) != 'Z')
		{
			if (t == 'D')
				gc_long_bytes_in += (long long) len;
			else if (t == 'E')
			{
				gc_note_server_error(body, len);
				failed = 1;
			}
		}
		if (failed)
			gc_fail("SERVER_ERROR", "%s", gc_server_error);
		gc_queries_done++;
		if (gc_pause_ms > 0)
		{
			struct timespec ts = {gc_pause_ms / 1000, (gc_pause_ms % 1000) * 1000000L};

			nanosleep(&ts, NULL);
		}
	}
	free(sql);
}

static void
gc_check_alive(void)
{
	const char *body;
	size_t		len;
	char		t;
	int			rows = 0;

	gc_stage = "alive";
	gc_alive = 0;
	gc_query("SELECT 1");
	while ((t = gc_get_msg(&body, &len)) != 'Z')
	{
		if (t == 'D')
			rows++;
		else if (t == 'E')
		{
			gc_note_server_error(body, len);
			gc_fail("SERVER_ERROR", "%s", gc_server_error);
		}
	}
	gc_alive = rows == 1;
}

static void
gc_usage(void)
{
	fprintf(stderr,
			"usage: gnutls_copy [--host H] [--port P] [--user U] [--dbname D] [--appname A]\n"
			"         [--password PW] [--cafile CA] [--tls 1.2|1.3]\n"
			"         [--copy-out ROWS] [--copy-in ROWS] [--table T] [--filler N]\n"
			"         [--long QUERIES] [--payload BYTES] [--pause-ms MS] [--hold]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	clock_gettime(CLOCK_MONOTONIC, &gc_t0);
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--hold") == 0)
		{
			gc_hold = 1;
			continue;
		}
		if (!v)
			gc_usage();
		i++;
		if (strcmp(a, "--host") == 0)
			gc_host = v;
		else if (strcmp(a, "--port") == 0)
			gc_port = v;
		else if (strcmp(a, "--user") == 0)
			gc_user = v;
		else if (strcmp(a, "--dbname") == 0)
			gc_dbname = v;
		else if (strcmp(a, "--appname") == 0)
			gc_appname = v;
		else if (strcmp(a, "--password") == 0)
			gc_password = v;
		else if (strcmp(a, "--cafile") == 0)
			gc_cafile = v;
		else if (strcmp(a, "--tls") == 0)
			gc_tls = v;
		else if (strcmp(a, "--copy-out") == 0)
			gc_copy_out_rows = atol(v);
		else if (strcmp(a, "--copy-in") == 0)
			gc_copy_in_rows = atol(v);
		else if (strcmp(a, "--table") == 0)
			gc_table = v;
		else if (strcmp(a, "--filler") == 0)
			gc_filler = atol(v);
		else if (strcmp(a, "--long") == 0)
			gc_long_queries = atol(v);
		else if (strcmp(a, "--payload") == 0)
			gc_payload = atol(v);
		else if (strcmp(a, "--pause-ms") == 0)
			gc_pause_ms = atol(v);
		else
			gc_usage();
	}
	if (gc_filler < 0 || gc_filler > 1000000 || gc_payload < 0 || gc_payload > 100000000)
		gc_usage();

	if (gnutls_global_init() < 0)
		gc_fail("EINIT", "gnutls_global_init");
	gc_connect();
	gc_startup();
	gc_get_pid();
	if (gc_copy_out_rows > 0)
		gc_copy_out();
	if (gc_copy_in_rows > 0)
		gc_copy_in();
	if (gc_long_queries > 0)
		gc_long();
	gc_stage = "done";
	if (gc_hold)
	{
		char		line[64];

		gc_print_json("hold", 1);
		if (!fgets(line, sizeof(line), stdin))
			line[0] = '\0';
	}
	gc_check_alive();
	gc_stage = "done";
	gc_put_msg('X', "", 0);
	gc_flush();
	gnutls_bye(gc_session, GNUTLS_SHUT_WR);
	gc_print_json("final", 1);
	close(gc_fd);
	gnutls_deinit(gc_session);
	gnutls_certificate_free_credentials(gc_cred);
	gnutls_global_deinit();
	return 0;
}

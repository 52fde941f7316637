/*
 * protocol.c
 *	  The hostile peer's side of the frontend/backend protocol over TLS:
 *	  output lines, reads and writes through OpenSSL and what their
 *	  failures mean, backend messages, queries, hold points.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

/*
 * OpenSSL 1.1.1 has no error for a peer that closes without close_notify:
 * it reports SSL_ERROR_SYSCALL with errno 0, which ssl_failure() takes as a
 * close already.  A reason code no error carries keeps the test below.
 */
#ifndef SSL_R_UNEXPECTED_EOF_WHILE_READING
#define SSL_R_UNEXPECTED_EOF_WHILE_READING (-1)
#endif

const char *const hp_outcome_names[] = {
	"ok", "error", "fatal", "closed", "tls_error"
};

SSL		   *hp_ssl;
int			hp_sock = -1;

static long long app_bytes_read = 0;

/* incoming bytes not yet consumed */
static unsigned char *inbuf;
static size_t inbuf_len;
static size_t inbuf_cap;

void
hp_say(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
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
enum outcome
hp_ssl_failure(int ret, const char *what)
{
	int			err = SSL_get_error(hp_ssl, ret);
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
	hp_say("io_error=%s:%s", what, detail);
	return kind;
}

enum outcome
hp_write_all(const void *buf, size_t len, const char *what)
{
	const unsigned char *p = buf;

	while (len > 0)
	{
		int			n;

		ERR_clear_error();
		errno = 0;
		n = SSL_write(hp_ssl, p, (int) len);
		if (n <= 0)
			return hp_ssl_failure(n, what);
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
			hp_say("result=tls_error");
			hp_say("detail=out of memory");
			exit(2);
		}
	}
	ERR_clear_error();
	errno = 0;
	n = SSL_read(hp_ssl, inbuf + inbuf_len, (int) (inbuf_cap - inbuf_len));
	if (n <= 0)
		return hp_ssl_failure(n, "read");
	inbuf_len += (size_t) n;
	app_bytes_read += n;
	return OUT_OK;
}

uint32_t
hp_get32(const unsigned char *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) |
		((uint32_t) p[2] << 8) | (uint32_t) p[3];

}

void
hp_put32(unsigned char *p, uint32_t v)
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
enum outcome
hp_read_msg(char *type, unsigned char **body, size_t *len)
{
	uint32_t	mlen;
	enum outcome o;

	while (inbuf_len < 5)
		if ((o = read_more()) != OUT_OK)
			return o;
	mlen = hp_get32(inbuf + 1);
	if (mlen < 4 || mlen > 64u * 1024 * 1024)
	{
		hp_say("io_error=protocol:bad message length %u", mlen);
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
int
hp_parse_error(const unsigned char *body, size_t len, char *out, size_t cap)
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
enum outcome
hp_read_until_ready(struct qres *r, char stop_at)
{
	int			had_error = 0;
	int			had_fatal = 0;

	for (;;)
	{
		char		type;
		unsigned char *body;
		size_t		len;
		enum outcome o = hp_read_msg(&type, &body, &len);

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
						int32_t		cl = (int32_t) hp_get32(body + i);

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
				if (hp_parse_error(body, len, r->error, sizeof(r->error)))
					had_fatal = 1;
				had_error = 1;
				hp_say("server_error=%s", r->error);
				break;
			default:
				break;
		}
		free(body);
		if (type == 'Z' || (stop_at != 0 && type == stop_at))
			return had_fatal ? OUT_FATAL : had_error ? OUT_ERROR : OUT_OK;
	}
}

enum outcome
hp_send_query(const char *sql)
{
	size_t		sl = strlen(sql) + 1;
	unsigned char *m = malloc(5 + sl);
	enum outcome o;

	if (m == NULL)
		exit(2);
	m[0] = 'Q';
	hp_put32(m + 1, (uint32_t) (4 + sl));
	memcpy(m + 5, sql, sl);
	o = hp_write_all(m, 5 + sl, "write_query");
	free(m);
	return o;
}

/* Send a query, read its whole answer, report it with prefix. */
enum outcome
hp_run_query(const char *sql, const char *prefix, struct qres *r)
{
	enum outcome o;

	memset(r, 0, sizeof(*r));
	app_bytes_read = 0;
	o = hp_send_query(sql);
	if (o == OUT_OK)
		o = hp_read_until_ready(r, 0);
	hp_say("%s_result=%s", prefix, hp_outcome_names[o]);
	hp_say("%s_app_bytes_read=%lld", prefix, app_bytes_read);
	if (r->datarows > 0 || o == OUT_OK)
	{
		hp_say("%s_datarows=%ld", prefix, r->datarows);
		hp_say("%s_datarow_bytes=%lld", prefix, r->datarow_bytes);
		if (r->datarow_bytes <= 200)
			hp_say("%s_row=%s", prefix, r->first_row);
	}
	if (r->tag[0])
		hp_say("%s_tag=%s", prefix, r->tag);
	return o;
}

void
hp_hold(const char *name)
{
	char		line[64];

	if (!hp_hold_enabled)
		return;
	hp_say("hold=%s", name);
	if (fgets(line, sizeof(line), stdin) == NULL)
	{
		/* stdin closed: go on */
	}
}

void
hp_set_blocking(int blocking)
{
	int			fl = fcntl(hp_sock, F_GETFL);

	if (fl >= 0)
		(void) fcntl(hp_sock, F_SETFL, blocking ? (fl & ~O_NONBLOCK) : (fl | O_NONBLOCK));
}

double
hp_now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

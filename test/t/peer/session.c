/*
 * session.c
 *	  Connecting: TCP, SSLRequest, the TLS handshake (with the options'
 *	  ciphers and certificate), key updates before authentication, the
 *	  StartupMessage up to ReadyForQuery; and what this client's TLS library
 *	  saw on the way, from its callbacks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "hostile_peer.h"

/* what this client's TLS library did, from its message callback */
static long key_updates_written = 0;
static long key_updates_read = 0;
static long handshakes_completed = 0;
static long key_updates_read_in_row = 0;	/* since the server's last data */
static long key_updates_read_max_in_row = 0;

/*
 * Count KeyUpdate messages both ways, and the server's in a row without
 * application data between them (TLS 1.3: a record's inner content type).
 */
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
		{
			key_updates_read++;
			key_updates_read_in_row++;
			if (key_updates_read_in_row > key_updates_read_max_in_row)
				key_updates_read_max_in_row = key_updates_read_in_row;
		}
	}
	else if (content_type == SSL3_RT_INNER_CONTENT_TYPE && !write_p &&
			 len >= 1 && p[0] == SSL3_RT_APPLICATION_DATA)
		key_updates_read_in_row = 0;
}

/* KeyUpdates we sent so far. */
long
key_updates_sent_so_far(void)
{
	return key_updates_written;
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

/* A PasswordMessage with the --password. */
static enum outcome
send_password(void)
{
	size_t		pl = strlen(password) + 1;
	unsigned char m[5 + 256];

	m[0] = 'p';
	put32(m + 1, (uint32_t) (4 + pl));
	memcpy(m + 5, password, pl);
	return write_all(m, 5 + pl, "write_password");
}

/* Read until the server closes, then report the kernel's counts. */
void
drain_and_say_tcp_counts(void)
{
	char		c[512];

	for (;;)
	{
		int			n;

		ERR_clear_error();
		errno = 0;
		n = SSL_read(ssl, c, sizeof(c));
		if (n <= 0)
		{
			(void) ssl_failure(n, "drain");
			break;
		}
	}
	/* after a close_notify, the FIN (which the kernel counts) */
	while (read(sock, c, sizeof(c)) > 0)
		;
	say_tcp_counts();
}

/* The kernel's counts for our socket. */
void
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

void
say_tls_counts(void)
{
	say("key_updates_sent_total=%ld", key_updates_written);
	say("key_updates_received_total=%ld", key_updates_read);
	say("key_updates_received_max_in_row=%ld", key_updates_read_max_in_row);
	say("renegotiations_completed=%ld",
		handshakes_completed > 0 ? handshakes_completed - 1 : 0);
}

int
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
		enum outcome o = ssl_failure(r, "handshake");

		if (wait_close)
		{
			char		c[512];

			while (read(sock, c, sizeof(c)) > 0)
				;
			say_tcp_counts();
		}
		say("result=%s", outcome_names[o]);
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
		if (type == 'R' && len >= 4 && get32(body) == 3 && password != NULL)
		{
			/* AuthenticationCleartextPassword: answer when the test says */
			free(body);
			hold("password_requested");
			if (send_password() != OUT_OK)
			{
				say("result=closed");
				return -1;
			}
			continue;
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
			free(body);
			if (wait_close)
				drain_and_say_tcp_counts();
			say("result=fatal");
			return -1;
		}
		free(body);
		if (type == 'Z')
			break;
	}
	say("ready=1");
	return 0;
}

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
hp_key_updates_sent_so_far(void)
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
	size_t		pl = strlen(hp_password) + 1;
	unsigned char m[5 + 256];

	m[0] = 'p';
	hp_put32(m + 1, (uint32_t) (4 + pl));
	memcpy(m + 5, hp_password, pl);
	return hp_write_all(m, 5 + pl, "write_password");
}

/* Read until the server closes, then report the kernel's counts. */
void
hp_drain_and_say_tcp_counts(void)
{
	char		c[512];

	for (;;)
	{
		int			n;

		ERR_clear_error();
		errno = 0;
		n = SSL_read(hp_ssl, c, sizeof(c));
		if (n <= 0)
		{
			(void) hp_ssl_failure(n, "drain");
			break;
		}
	}
	/* after a close_notify, the FIN (which the kernel counts) */
	while (read(hp_sock, c, sizeof(c)) > 0)
		;
	hp_say_tcp_counts();
}

/* The kernel's counts for our socket. */
void
hp_say_tcp_counts(void)
{
	struct tcp_info ti;
	socklen_t	tl = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(hp_sock, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0)
	{
		hp_say("tcp_info=unavailable:%s", strerror(errno));
		return;
	}
	hp_say("tcp_bytes_received=%llu", (unsigned long long) ti.tcpi_bytes_received);
	hp_say("tcp_bytes_acked=%llu", (unsigned long long) ti.tcpi_bytes_acked);
}

void
hp_say_tls_counts(void)
{
	hp_say("key_updates_sent_total=%ld", key_updates_written);
	hp_say("key_updates_received_total=%ld", key_updates_read);
	hp_say("key_updates_received_max_in_row=%ld", key_updates_read_max_in_row);
	hp_say("renegotiations_completed=%ld",
		   handshakes_completed > 0 ? handshakes_completed - 1 : 0);
}

int
hp_connect_and_start(const char *host, int port, const char *user,
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

	hp_sock = socket(AF_INET, SOCK_STREAM, 0);
	if (hp_sock < 0)
	{
		hp_say("result=closed");
		hp_say("detail=socket: %s", strerror(errno));
		return -1;
	}
	(void) setsockopt(hp_sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t) port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
	{
		hp_say("detail=bad host %s (an IPv4 address is needed)", host);
		hp_say("result=error");
		return -1;
	}
	if (connect(hp_sock, (struct sockaddr *) &sa, sizeof(sa)) != 0)
	{
		hp_say("result=closed");
		hp_say("detail=connect: %s", strerror(errno));
		return -1;
	}
	{
		struct sockaddr_in local;
		socklen_t	ll = sizeof(local);

		if (getsockname(hp_sock, (struct sockaddr *) &local, &ll) == 0)
			hp_say("client_port=%u", (unsigned) ntohs(local.sin_port));
	}

	/* SSLRequest */
	hp_put32(req, 8);
	hp_put32(req + 4, 80877103);
	if (write(hp_sock, req, sizeof(req)) != (ssize_t) sizeof(req) ||
		read(hp_sock, &answer, 1) != 1 || answer != 'S')
	{
		hp_say("result=closed");
		hp_say("detail=SSLRequest refused");
		return -1;
	}

	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL ||
		!SSL_CTX_set_min_proto_version(ctx, version) ||
		!SSL_CTX_set_max_proto_version(ctx, version))
	{
		hp_say("detail=SSL_CTX set-up failed");
		hp_say("result=tls_error");
		return -1;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_options(ctx, (uint64_t) extra_options);
	SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
	SSL_CTX_set_msg_callback(ctx, on_tls_message);
	SSL_CTX_set_info_callback(ctx, on_tls_info);
	if (hp_cert_file != NULL &&
		(SSL_CTX_use_certificate_file(ctx, hp_cert_file, SSL_FILETYPE_PEM) != 1 ||
		 SSL_CTX_use_PrivateKey_file(ctx, hp_key_file ? hp_key_file : hp_cert_file,
									 SSL_FILETYPE_PEM) != 1))
	{
		hp_say("detail=client certificate %s refused", hp_cert_file);
		hp_say("result=tls_error");
		return -1;
	}
	if (hp_ciphersuites != NULL && !SSL_CTX_set_ciphersuites(ctx, hp_ciphersuites))
	{
		hp_say("detail=ciphersuites %s refused", hp_ciphersuites);
		hp_say("result=tls_error");
		return -1;
	}
	if (hp_cipher_list != NULL && !SSL_CTX_set_cipher_list(ctx, hp_cipher_list))
	{
		hp_say("detail=cipher list %s refused", hp_cipher_list);
		hp_say("result=tls_error");
		return -1;
	}
	hp_ssl = SSL_new(ctx);
	if (hp_ssl == NULL || !SSL_set_fd(hp_ssl, hp_sock))
	{
		hp_say("detail=SSL_new failed");
		hp_say("result=tls_error");
		return -1;
	}
	ERR_clear_error();
	r = SSL_connect(hp_ssl);
	if (r != 1)
	{
		enum outcome o = hp_ssl_failure(r, "handshake");

		if (hp_wait_close)
		{
			char		c[512];

			while (read(hp_sock, c, sizeof(c)) > 0)
				;
			hp_say_tcp_counts();
		}
		hp_say("result=%s", hp_outcome_names[o]);
		return -1;
	}
	hp_say("tls_version=%s", SSL_get_version(hp_ssl));
	hp_say("cipher=%s", SSL_get_cipher_name(hp_ssl));
	if (hp_next_cipher_list != NULL && !SSL_set_cipher_list(hp_ssl, hp_next_cipher_list))
	{
		hp_say("detail=cipher list %s refused", hp_next_cipher_list);
		hp_say("result=tls_error");
		return -1;
	}

	/* KeyUpdates before the StartupMessage: before authentication */
	if (hp_preauth_key_updates > 0)
	{
		long		sent = 0;

		for (long i = 0; i < hp_preauth_key_updates; i++)
		{
			ERR_clear_error();
			if (!SSL_key_update(hp_ssl, SSL_KEY_UPDATE_NOT_REQUESTED))
				break;
			errno = 0;
			r = SSL_do_handshake(hp_ssl);
			if (r != 1)
			{
				(void) hp_ssl_failure(r, "send_preauth_key_update");
				break;
			}
			sent++;
		}
		hp_say("preauth_key_updates_sent=%ld", sent);
	}
	if (hp_no_startup)
		return 0;

	/* StartupMessage */
	sl = 8;
	sl += (size_t) snprintf((char *) startup + sl, sizeof(startup) - sl - 2,
							"user%c%s%cdatabase%c%s%capplication_name%chostile_peer%c",
							0, user, 0, 0, db, 0, 0, 0);
	startup[sl++] = 0;
	hp_put32(startup, (uint32_t) sl);
	hp_put32(startup + 4, 196608);
	if (hp_write_all(startup, sl, "write_startup") != OUT_OK)
	{
		hp_say("result=closed");
		return -1;
	}

	/* up to ReadyForQuery: pick up our backend's pid on the way */
	for (;;)
	{
		char		type;
		unsigned char *body;
		size_t		len;
		enum outcome o = hp_read_msg(&type, &body, &len);

		if (o != OUT_OK)
		{
			hp_say("result=%s", hp_outcome_names[o]);
			return -1;
		}
		if (type == 'R' && len >= 4 && hp_get32(body) == 3 && hp_password != NULL)
		{
			/* AuthenticationCleartextPassword: answer when the test says */
			free(body);
			hp_hold("password_requested");
			if (send_password() != OUT_OK)
			{
				hp_say("result=closed");
				return -1;
			}
			continue;
		}
		if (type == 'R' && len >= 4 && hp_get32(body) != 0)
		{
			hp_say("detail=authentication method %u requested; trust is needed", hp_get32(body));
			hp_say("result=error");
			free(body);
			return -1;
		}
		if (type == 'K' && len >= 4)
			hp_say("pid=%u", hp_get32(body));
		if (type == 'E')
		{
			memset(&dummy, 0, sizeof(dummy));
			hp_parse_error(body, len, dummy.error, sizeof(dummy.error));
			hp_say("server_error=%s", dummy.error);
			free(body);
			if (hp_wait_close)
				hp_drain_and_say_tcp_counts();
			hp_say("result=fatal");
			return -1;
		}
		free(body);
		if (type == 'Z')
			break;
	}
	hp_say("ready=1");
	return 0;
}

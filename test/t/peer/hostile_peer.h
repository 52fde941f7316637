/*
 * hostile_peer.h
 *	  What the files of the hostile peer share: the outcome of an I/O
 *	  attempt, the connection, the options, the protocol helpers
 *	  (protocol.c, session.c) and the modes of each attack family.
 *
 * main.c says what the peer is for, and what each mode and option does.
 */
#ifndef HOSTILE_PEER_H
#define HOSTILE_PEER_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

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

extern const char *const outcome_names[];

/* results of the last query */
struct qres
{
	long		datarows;
	long long	datarow_bytes;	/* column values, summed */
	char		first_row[256];
	char		tag[128];
	char		error[256];
};

/* the connection (protocol.c) */
extern SSL *ssl;
extern int	sock;

/* options (main.c) */
extern int	hold_enabled;
extern long preauth_key_updates;
extern int	no_startup;
extern const char *cipher_list;
extern const char *ciphersuites;
extern const char *next_cipher_list;
extern long every_kb;
extern const char *cert_file;
extern const char *key_file;
extern const char *query_text;
extern const char *password;
extern int	wait_close;

/* protocol.c: output, TLS I/O, backend messages, queries */
extern void say(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern enum outcome ssl_failure(int ret, const char *what);
extern enum outcome write_all(const void *buf, size_t len, const char *what);
extern uint32_t get32(const unsigned char *p);
extern void put32(unsigned char *p, uint32_t v);
extern enum outcome read_msg(char *type, unsigned char **body, size_t *len);
extern int	parse_error(const unsigned char *body, size_t len, char *out, size_t cap);
extern enum outcome read_until_ready(struct qres *r, char stop_at);
extern enum outcome send_query(const char *sql);
extern enum outcome run_query(const char *sql, const char *prefix, struct qres *r);
extern void hold(const char *name);
extern void set_blocking(int blocking);
extern double now_seconds(void);

/* session.c: connecting, and what the TLS library saw */
extern int	connect_and_start(const char *host, int port, const char *user,
							  const char *db, const char *tls, long extra_options);
extern void say_tcp_counts(void);
extern void drain_and_say_tcp_counts(void);
extern void say_tls_counts(void);
extern long key_updates_sent_so_far(void);

/* keyupdates.c: TLS 1.3 key updates */
extern enum outcome send_key_update(int type);
extern enum outcome mode_keyupdate_flood(long n, int type);
extern enum outcome mode_keyupdate_backlog(long n);
extern enum outcome mode_keyupdate_spaced(long n);

/* renegotiation.c: TLS 1.2 renegotiation */
extern enum outcome mode_renegotiate(void);
extern enum outcome mode_refuse_renegotiation(long bytes);
extern enum outcome mode_read_large(long bytes);
extern enum outcome mode_read_large_pipelined(long bytes);

/* records.c: what the records carry, COPY streams */
extern enum outcome mode_keyupdate_interleaved(long n);
extern enum outcome mode_never_answer(long mb, const char *table, long stall_kb);
extern enum outcome mode_copy_keyupdates(long mb, const char *table);
extern enum outcome mode_copy_answering(long seconds, const char *table,
										int then_query);

/* stalls.c: a peer that does not read, or says nothing */
extern enum outcome mode_late_reader(long rows);
extern enum outcome mode_hold_before_reading(long pad);
extern enum outcome mode_idle_then_query(void);
extern enum outcome mode_silence(void);

#endif							/* HOSTILE_PEER_H */

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

extern const char *const hp_outcome_names[];

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
extern SSL *hp_ssl;
extern int	hp_sock;

/* options (main.c) */
extern int	hp_hold_enabled;
extern long hp_preauth_key_updates;
extern int	hp_no_startup;
extern const char *hp_cipher_list;
extern const char *hp_ciphersuites;
extern const char *hp_next_cipher_list;
extern long hp_every_kb;
extern const char *hp_cert_file;
extern const char *hp_key_file;
extern const char *hp_query_text;
extern const char *hp_password;
extern int	hp_wait_close;

/* protocol.c: output, TLS I/O, backend messages, queries */
extern void hp_say(const char *fmt,...) __attribute__((format(printf, 1, 2)));
extern enum outcome hp_ssl_failure(int ret, const char *what);
extern enum outcome hp_write_all(const void *buf, size_t len, const char *what);
extern uint32_t hp_get32(const unsigned char *p);
extern void hp_put32(unsigned char *p, uint32_t v);
extern enum outcome hp_read_msg(char *type, unsigned char **body, size_t *len);
extern int	hp_parse_error(const unsigned char *body, size_t len, char *out, size_t cap);
extern enum outcome hp_read_until_ready(struct qres *r, char stop_at);
extern enum outcome hp_send_query(const char *sql);
extern enum outcome hp_run_query(const char *sql, const char *prefix, struct qres *r);
extern void hp_hold(const char *name);
extern void hp_set_blocking(int blocking);
extern double hp_now_seconds(void);

/* session.c: connecting, and what the TLS library saw */
extern int	hp_connect_and_start(const char *host, int port, const char *user,
								 const char *db, const char *tls, long extra_options);
extern void hp_say_tcp_counts(void);
extern void hp_drain_and_say_tcp_counts(void);
extern void hp_say_tls_counts(void);
extern long hp_key_updates_sent_so_far(void);

/* keyupdates.c: TLS 1.3 key updates */
extern enum outcome hp_send_key_update(int type);
extern enum outcome hp_mode_keyupdate_flood(long n, int type);
extern enum outcome hp_mode_keyupdate_backlog(long n);
extern enum outcome hp_mode_keyupdate_spaced(long n);

/* renegotiation.c: TLS 1.2 renegotiation */
extern enum outcome hp_mode_renegotiate(void);
extern enum outcome hp_mode_refuse_renegotiation(long bytes);
extern enum outcome hp_mode_read_large(long bytes);
extern enum outcome hp_mode_read_large_pipelined(long bytes);

/* records.c: what the records carry, COPY streams */
extern enum outcome hp_mode_keyupdate_interleaved(long n);
extern enum outcome hp_mode_never_answer(long mb, const char *table, long stall_kb);
extern enum outcome hp_mode_copy_keyupdates(long mb, const char *table);
extern enum outcome hp_mode_copy_answering(long seconds, const char *table,
										   int then_query);

/* stalls.c: a peer that does not read, or says nothing */
extern enum outcome hp_mode_late_reader(long rows);
extern enum outcome hp_mode_hold_before_reading(long pad);
extern enum outcome hp_mode_idle_then_query(void);
extern enum outcome hp_mode_silence(void);

#endif							/* HOSTILE_PEER_H */

/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every difference between PostgreSQL (and OpenSSL) versions that
 *	  ssl_renegotiate cares about, in one place.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSL_RENEGOTIATE_COMPAT_H
#define SSL_RENEGOTIATE_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "ssl_renegotiate requires PostgreSQL 15 or later"
#endif

/* Index of this backend's slot, 0 .. MaxBackends - 1. */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define SSLR_MY_BACKEND_INDEX (MyProcNumber)
#else
#include "storage/backendid.h"
#define SSLR_MY_BACKEND_INDEX (MyBackendId - 1)
#endif

/*
 * Readers take the counters a backend adds to on every TLS record one
 * 8-byte field at a time, without waiting for it (slots.c): each field must
 * be read and written whole.
 */
#include "port/atomics.h"
#ifndef PG_HAVE_8BYTE_SINGLE_COPY_ATOMICITY
#error "ssl_renegotiate requires a platform that reads and writes 8-byte integers whole"
#endif

/*
 * The "extra" of a setting's value, which PostgreSQL frees: malloc'd up to
 * 15, from guc_malloc (its own memory context) since 16.
 */
#if PG_VERSION_NUM >= 160000
#define sslr_guc_malloc(size) guc_malloc(LOG, (size))
#else
#define sslr_guc_malloc(size) malloc(size)
#endif

/* get_database_oid(): in commands/dbcommands.h up to 18, in catalog/pg_database.h since 19. */
#if PG_VERSION_NUM >= 190000
#include "catalog/pg_database.h"
#else
#include "commands/dbcommands.h"
#endif

/*
 * PostgreSQL's record of a setting (utils/guc_tables.h), and the strings
 * it keeps there: up to 15 found by a walk of the array and malloc'd, from
 * 16 on find_option and guc_strdup (its own memory context).
 */
#include "utils/guc_tables.h"
#if PG_VERSION_NUM >= 160000
#define sslr_find_guc(name) find_option((name), false, true, DEBUG1)
#define sslr_guc_strdup(str) guc_strdup(LOG, (str))
#define sslr_guc_free(ptr) guc_free(ptr)
#else
static inline struct config_generic *
sslr_find_guc(const char *name)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
	{
		if (pg_strcasecmp(vars[i]->name, name) == 0)
			return vars[i];
	}
	return NULL;
}
#define sslr_guc_strdup(str) strdup(str)
#define sslr_guc_free(ptr) free(ptr)
#endif

/* OpenSSL before 1.1.1 has no TLS 1.3 and no key updates. */
#include <openssl/opensslv.h>
#if OPENSSL_VERSION_NUMBER < 0x10101000L
#error "ssl_renegotiate requires OpenSSL 1.1.1 or later"
#endif

/*
 * The bytes read from the socket are counted as OpenSSL reads them, by a
 * callback on the connection's read BIO (accounting.c): BIO_set_callback_ex
 * is OpenSSL 1.1.1's, which the check above requires already.
 */

/* The peer's certificate, with a reference the caller must free. */
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#define sslr_get1_peer_certificate(ssl) SSL_get1_peer_certificate(ssl)
#else
#define sslr_get1_peer_certificate(ssl) SSL_get_peer_certificate(ssl)
#endif

/*
 * How the record callback reaches every connection (accounting.c): through
 * the "new" function of an ex_data index, which OpenSSL calls for each
 * object it creates.  Up to 3.1 SSL_new calls it last, on a complete SSL
 * whose callbacks were already copied from its SSL_CTX, so it can set the
 * callback on the SSL itself.  From 3.2 on (the SSL/SSL_CONNECTION split of
 * ossl_ssl_init) it is called before the SSL has its method -- setting a
 * callback then crashes -- and SSL_new copies the context's callback over
 * it afterwards anyway.  There the index is one of SSL_CTX, whose "new"
 * function runs on a context complete enough to take the callback, and
 * every SSL created from that context starts with it.
 */
#if OPENSSL_VERSION_NUMBER >= 0x30200000L
#define sslr_get_connection_ex_new_index(new_func) \
	SSL_CTX_get_ex_new_index(0, "ssl_renegotiate", (new_func), NULL, NULL)
#define sslr_set_callback_of_new(parent, callback) \
	SSL_CTX_set_msg_callback((SSL_CTX *) (parent), (callback))
#else
#define sslr_get_connection_ex_new_index(new_func) \
	SSL_get_ex_new_index(0, "ssl_renegotiate", (new_func), NULL, NULL)
#define sslr_set_callback_of_new(parent, callback) \
	SSL_set_msg_callback((SSL *) (parent), (callback))
#endif

/*
 * A shared hash table of a fixed size (role_totals.c): up to 18 its initial
 * and its largest size are given apart; from 19 on there is one size.
 */
#if PG_VERSION_NUM >= 190000
#define sslr_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (info), (flags))
#else
#define sslr_shmem_init_hash(name, nelems, info, flags) \
	ShmemInitHash((name), (nelems), (nelems), (info), (flags))
#endif

#endif							/* SSL_RENEGOTIATE_COMPAT_H */

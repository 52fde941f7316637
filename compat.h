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

/* OpenSSL before 1.1.1 has no TLS 1.3 and no key updates. */
#include <openssl/opensslv.h>
#if OPENSSL_VERSION_NUMBER < 0x10101000L
#error "ssl_renegotiate requires OpenSSL 1.1.1 or later"
#endif

/* The peer's certificate, with a reference the caller must free. */
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#define sslr_get1_peer_certificate(ssl) SSL_get1_peer_certificate(ssl)
#else
#define sslr_get1_peer_certificate(ssl) SSL_get_peer_certificate(ssl)
#endif

#endif							/* SSL_RENEGOTIATE_COMPAT_H */

/*-------------------------------------------------------------------------
 *
 * accounting.h
 *	  The OpenSSL callbacks that count every TLS record of this connection.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_ACCOUNTING_H
#define SSLR_ACCOUNTING_H

#include <openssl/ssl.h>

extern void sslr_accounting_init(void);
extern void sslr_accounting_attach(SSL *ssl);

#endif							/* SSLR_ACCOUNTING_H */

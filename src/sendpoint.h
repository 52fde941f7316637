/*-------------------------------------------------------------------------
 *
 * sendpoint.h
 *	  The send side's safe points: PostgreSQL's PqCommMethods, wrapped.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SENDPOINT_H
#define SSLR_SENDPOINT_H

extern void sslr_sendpoint_attach(void);

#endif							/* SSLR_SENDPOINT_H */

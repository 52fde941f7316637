/*-------------------------------------------------------------------------
 *
 * statsfile.h
 *	  The totals across a clean restart: the file the postmaster keeps them
 *	  in.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_STATSFILE_H
#define SSLR_STATSFILE_H

extern void sslr_statsfile_startup(void);

#endif							/* SSLR_STATSFILE_H */

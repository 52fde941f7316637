/*-------------------------------------------------------------------------
 *
 * sql_api.h
 *	  What the SQL-callable functions share: the preload check and the
 *	  visibility rule.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SQL_API_H
#define SSLR_SQL_API_H

/* ERROR unless loaded by shared_preload_libraries */
extern void sslr_require_preload(void);

/* May the caller see the traffic of this role's sessions? */
extern bool sslr_may_see(Oid userid);

/* May the caller see every role's traffic (pg_read_all_stats)? */
extern bool sslr_may_see_all(void);

extern double sslr_us_to_ms(int64 us);

#endif							/* SSLR_SQL_API_H */

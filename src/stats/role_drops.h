/*-------------------------------------------------------------------------
 *
 * role_drops.h
 *	  Rows of dropped roles and databases: purged from the totals per
 *	  database and role at the drop's commit, and wherever a backend that
 *	  can read the catalogs finds one.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_ROLE_DROPS_H
#define SSLR_ROLE_DROPS_H

#include "nodes/pg_list.h"
#include "nodes/nodes.h"

#include "stats/role_totals.h"

/* around a utility statement (ProcessUtility_hook): before it, after it */
extern List *sslr_role_drops_before(Node *stmt);
extern void sslr_role_drops_after(List *dropping);

/* at a login, in its transaction: check the entries restored at start */
extern void sslr_role_drops_check_restored(void);

/* does the key's role (and database) exist?  If not, its rows are purged */
extern bool sslr_role_drops_pair_alive(const SslrRoleKey *key);

#endif							/* SSLR_ROLE_DROPS_H */

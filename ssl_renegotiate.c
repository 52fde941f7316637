/*-------------------------------------------------------------------------
 *
 * ssl_renegotiate.c
 *	  Module start-up: settings, and the hooks that connect the rooms.
 *
 * ssl_renegotiate accounts every TLS byte and record of every connection,
 * in both directions, and rotates the keys of a connection symmetrically
 * (bytes sent or received, time, cipher limits): TLS 1.3 KeyUpdate, TLS 1.2
 * renegotiation where allowed.  It must be loaded by
 * shared_preload_libraries: its shared memory is sized at start-up and its
 * OpenSSL callback is set on the server's SSL context.
 *
 * Hooks, each chained to the one it replaces:
 *	- shmem_request_hook / shmem_startup_hook: slots, buffers before
 *	  authentication, totals and totals per database and role (slots.c,
 *	  preauth.c, totals.c, role_totals.c), and in the postmaster the totals
 *	  kept across a clean restart (statsfile.c)
 *	- ClientAuthentication_hook: the TLS connection is up; attach this
 *	  backend's slot, count there, start enforcing and wrap the send
 *	  path (totals.c, accounting.c, policy.c, sendpoint.c)
 * and, with OpenSSL, an ex_data index whose "new" function puts the record
 * callback on every connection (accounting.c).  The settings' variables
 * are in settings.c, below every room that reads them.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "libpq/auth.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "accounting.h"
#include "policy.h"
#include "preauth.h"
#include "role_totals.h"
#include "sendpoint.h"
#include "settings.h"
#include "slots.h"
#include "statsfile.h"
#include "totals.h"

PG_MODULE_MAGIC;

static const struct config_enum_entry sslr_tls12_options[] = {
	{"renegotiate", SSLR_TLS12_RENEGOTIATE, false},
	{"warn", SSLR_TLS12_WARN, false},
	{"terminate", SSLR_TLS12_TERMINATE, false},
	{NULL, 0, false}
};

/* saved hooks */
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ClientAuthentication_hook_type prev_client_authentication_hook = NULL;

void		_PG_init(void);

static void
sslr_shmem_request_hook(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	sslr_slots_shmem_request();
	sslr_preauth_shmem_request();
	sslr_totals_shmem_request();
	sslr_role_totals_shmem_request();
}

static void
sslr_shmem_startup_hook(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	sslr_slots_shmem_startup();
	sslr_preauth_shmem_startup();
	sslr_totals_shmem_startup();
	sslr_role_totals_shmem_startup();
	sslr_statsfile_startup();
}

/*
 * The TLS handshake is over and the backend has a PGPROC: the earliest
 * point where a TLS connection can take its shared slot.  Logins that fail
 * in the authentication method pass here too; those rejected before it
 * (pg_hba "reject", no pg_hba line) and failed handshakes stay counted in
 * their buffer until they are gone (see preauth.c).
 */
static void
sslr_client_authentication_hook(Port *port, int status)
{
	if (prev_client_authentication_hook)
		prev_client_authentication_hook(port, status);

	if (port->ssl_in_use && port->ssl != NULL)
	{
		sslr_totals_attach(port);
		sslr_accounting_attached(port->ssl);
		sslr_rekey_start(port);
		sslr_sendpoint_install();
	}
}

static void
sslr_assign_policy_setting(int newval pg_attribute_unused(),
						   void *extra pg_attribute_unused())
{
	sslr_policy_changed();
}

static void
sslr_assign_log_rekeys(bool newval pg_attribute_unused(),
					   void *extra pg_attribute_unused())
{
	sslr_policy_changed();
}

static void
sslr_define_settings(void)
{
	DefineCustomIntVariable("ssl_renegotiate.byte_limit",
							"Rotates a TLS connection's keys when this much was sent, or received, under one key.",
							"Each direction is counted on its own. 0 turns byte-based rotation off; cipher limits still apply.",
							&sslr_byte_limit_kb,
							SSLR_BYTE_LIMIT_KB_DEFAULT, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, sslr_assign_policy_setting, NULL);

	DefineCustomIntVariable("ssl_renegotiate.interval",
							"Rotates a TLS connection's keys at its first I/O after they were used this long.",
							"0 turns time-based rotation off.",
							&sslr_interval_s,
							SSLR_INTERVAL_S_DEFAULT, 0, INT_MAX / 1000,
							PGC_SUSET,
							GUC_UNIT_S,
							NULL, sslr_assign_policy_setting, NULL);

	DefineCustomIntVariable("ssl_renegotiate.hard_limit",
							"Ends a TLS connection when more than this was sent, or received, under one key.",
							"Catches peers that do not rotate their keys when asked. 0 turns it off.",
							&sslr_hard_limit_kb,
							SSLR_HARD_LIMIT_KB_DEFAULT, 0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, sslr_assign_policy_setting, NULL);

	DefineCustomEnumVariable("ssl_renegotiate.tls12",
							 "What a TLS 1.2 connection does when it reaches a rotation limit.",
							 "\"renegotiate\" starts a server-initiated renegotiation, \"warn\" logs once and goes on, \"terminate\" ends the connection.",
							 &sslr_tls12_policy,
							 SSLR_TLS12_DEFAULT,
							 sslr_tls12_options,
							 PGC_SUSET,
							 0,
							 NULL, sslr_assign_policy_setting, NULL);

	DefineCustomBoolVariable("ssl_renegotiate.log_rekeys",
							 "Logs each TLS key rotation.",
							 NULL,
							 &sslr_log_rekeys,
							 SSLR_LOG_REKEYS_DEFAULT,
							 PGC_SUSET,
							 0,
							 NULL, sslr_assign_log_rekeys, NULL);

	DefineCustomIntVariable("ssl_renegotiate.max_peer_key_updates",
							"Ends a TLS 1.3 connection whose client sends key updates unasked faster than this burst allows.",
							"A client may send this many at once, and one more for every 16 kB it sends and every second. 0 turns the bound off.",
							&sslr_max_peer_key_updates,
							SSLR_MAX_PEER_KEY_UPDATES_DEFAULT, 0, INT_MAX,
							PGC_SUSET,
							0,
							NULL, sslr_assign_policy_setting, NULL);

	DefineCustomIntVariable("ssl_renegotiate.max_database_role_totals",
							"Sets the number of (database, role) pairs whose TLS totals are kept.",
							"When a new pair finds the table full, the pair with the fewest bytes is evicted.",
							&sslr_max_database_role_totals,
							SSLR_MAX_DATABASE_ROLE_TOTALS_DEFAULT, 1, INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("ssl_renegotiate");
}

void
_PG_init(void)
{
	/*
	 * Without shared_preload_libraries there is no shared memory and no
	 * callback on the SSL context; the SQL functions say so.
	 */
	if (!process_shared_preload_libraries_in_progress)
		return;

	sslr_define_settings();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = sslr_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = sslr_shmem_startup_hook;
	prev_client_authentication_hook = ClientAuthentication_hook;
	ClientAuthentication_hook = sslr_client_authentication_hook;

	/* not a hook of PostgreSQL's: see accounting.c */
	sslr_accounting_init();
}

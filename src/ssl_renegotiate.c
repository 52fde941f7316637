/*-------------------------------------------------------------------------
 *
 * ssl_renegotiate.c
 *	  Module start-up: settings, and the hooks that connect the modules.
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
 *	- ProcessUtility_hook: the values a statement types for the settings
 *	  and ALTER SYSTEM (setting_checks.c); DROP ROLE and DROP DATABASE,
 *	  whose rows per database and role go at commit (role_drops.c)
 *	- ClientAuthentication_hook: the TLS connection is up; attach this
 *	  backend's slot, count there, start enforcing and wrap the send
 *	  path (totals.c, accounting.c, policy.c, sendpoint.c); at any
 *	  login, once after start, check the rows per database and role the
 *	  statistics file brought back (role_drops.c)
 *	- emit_log_hook: once a limit reached on the inbound path ended the
 *	  connection, PostgreSQL's lines about a lost client stay out of the
 *	  server log (ending.c)
 * and, with OpenSSL, an ex_data index whose "new" function puts the record
 * callback on every connection (accounting.c).  The settings are defined,
 * and checked, in setting_checks.c; their variables are in settings.c,
 * below every module that reads them.
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
#include "tcop/utility.h"

#include "accounting.h"
#include "rotation/ending.h"
#include "rotation/policy.h"
#include "sendpoint.h"
#include "settings/setting_checks.h"
#include "stats/preauth.h"
#include "stats/role_drops.h"
#include "stats/role_totals.h"
#include "stats/slots.h"
#include "stats/statsfile.h"
#include "stats/totals.h"

PG_MODULE_MAGIC;

/* saved hooks */
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static ClientAuthentication_hook_type prev_client_authentication_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

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

	/* in the login's transaction, before it can create a role */
	if (status == STATUS_OK)
		sslr_role_drops_check_restored();

	if (port->ssl_in_use && port->ssl != NULL)
	{
		sslr_totals_attach(port);
		sslr_accounting_attach(port->ssl);
		sslr_policy_attach(port);
		sslr_sendpoint_attach();
	}
}

static void
sslr_process_utility(PlannedStmt *pstmt, const char *queryString,
					 bool readOnlyTree, ProcessUtilityContext context,
					 ParamListInfo params, QueryEnvironment *queryEnv,
					 DestReceiver *dest, QueryCompletion *qc)
{
	bool		saved = sslr_settings_utility_enter(pstmt->utilityStmt);
	List	   *dropping = sslr_role_drops_before(pstmt->utilityStmt);

	PG_TRY();
	{
		if (prev_process_utility_hook)
			prev_process_utility_hook(pstmt, queryString, readOnlyTree, context,
									  params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		sslr_settings_utility_leave(saved);
	}
	PG_END_TRY();
	sslr_role_drops_after(dropping);
}

static void
sslr_emit_log_hook(ErrorData *edata)
{
	if (sslr_ending_hides(edata))
		edata->output_to_server = false;
	else if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
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

	sslr_settings_define();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = sslr_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = sslr_shmem_startup_hook;
	prev_client_authentication_hook = ClientAuthentication_hook;
	ClientAuthentication_hook = sslr_client_authentication_hook;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = sslr_process_utility;
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = sslr_emit_log_hook;

	/* not a hook of PostgreSQL's: see accounting.c */
	sslr_accounting_init();
}

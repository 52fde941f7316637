/*-------------------------------------------------------------------------
 *
 * setting_checks.h
 *	  Defining the ssl_renegotiate.* settings, and refusing values that
 *	  would switch protection off by accident.
 *
 * Copyright (c) 2026, ssl_renegotiate developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef SSLR_SETTING_CHECKS_H
#define SSLR_SETTING_CHECKS_H

#include "nodes/nodes.h"

/* From _PG_init: the settings. */
extern void sslr_settings_define(void);

/* around each utility statement: typed values checked, ALTER SYSTEM noted */
extern bool sslr_settings_utility_enter(Node *stmt);
extern void sslr_settings_utility_leave(bool saved);

#endif							/* SSLR_SETTING_CHECKS_H */

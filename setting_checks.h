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

/* From _PG_init: the settings, and the hook that recognises ALTER SYSTEM. */
extern void sslr_settings_define(void);

#endif							/* SSLR_SETTING_CHECKS_H */

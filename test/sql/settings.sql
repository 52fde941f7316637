--
-- Settings: names, types, units, defaults, contexts, and bad values.
--
SELECT name, setting, unit, vartype, context, boot_val, min_val, max_val,
       enumvals
FROM pg_settings
WHERE name LIKE 'ssl\_renegotiate.%'
ORDER BY name;

-- Every name is typed as it is: none is a reserved word.
SET ssl_renegotiate.byte_limit = '64kB';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = '1GB';
SHOW ssl_renegotiate.byte_limit;
SELECT set_config('ssl_renegotiate.byte_limit', '640kB', false);
SET ssl_renegotiate.byte_limit = 0;
SHOW ssl_renegotiate.byte_limit;
RESET ssl_renegotiate.byte_limit;
SHOW ssl_renegotiate.byte_limit;

SET ssl_renegotiate.interval = '5min';
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = 90;
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.hard_limit = '2GB';
SHOW ssl_renegotiate.hard_limit;
SET ssl_renegotiate.tls12 = 'renegotiate';
SET ssl_renegotiate.tls12 = 'terminate';
SET ssl_renegotiate.tls12 = 'warn';
SHOW ssl_renegotiate.tls12;
SET ssl_renegotiate.log_rekeys = on;
SET ssl_renegotiate.max_peer_key_updates = 8;
RESET ALL;

-- Bad values: each is refused with a clear error and SQLSTATE.
\set VERBOSITY default
SET ssl_renegotiate.byte_limit = -1;
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.byte_limit = '5min';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.byte_limit = '4TB';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.byte_limit = 'lots';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.interval = '-1s';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.interval = '10MB';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.interval = '100 years';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.hard_limit = '1 fortnight';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.interval = '30d';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.hard_limit = '10TB';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.min_rekey_gap = '2h';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.tls12 = 'sometimes';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.tls12 = '';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.log_rekeys = 'perhaps';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.max_peer_key_updates = -5;
\echo :LAST_ERROR_SQLSTATE

-- No silent off: a value other than 0 that would round to 0 is refused,
-- with the smallest value accepted and the hint that 0 turns it off.
SET ssl_renegotiate.byte_limit = '100B';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.byte_limit = '511B';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.byte_limit = '0.5kB';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.interval = '400ms';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.hard_limit = '500B';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.hard_limit = '1MB';
\echo :LAST_ERROR_SQLSTATE
-- "off" was never a value of these settings: 0 is, and the hint says so
SET ssl_renegotiate.byte_limit = off;
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.interval = 'off';
\echo :LAST_ERROR_SQLSTATE
-- ... in every place a value can come from
CREATE ROLE regress_sslr_settings;
ALTER ROLE regress_sslr_settings SET ssl_renegotiate.byte_limit = '100B';
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_sslr_settings IN DATABASE contrib_regression SET ssl_renegotiate.interval = '400ms';
\echo :LAST_ERROR_SQLSTATE
ALTER DATABASE contrib_regression SET ssl_renegotiate.byte_limit = '100B';
\echo :LAST_ERROR_SQLSTATE
ALTER DATABASE contrib_regression SET ssl_renegotiate.hard_limit = '1kB';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET ssl_renegotiate.byte_limit = '100B';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET ssl_renegotiate.hard_limit = '1kB';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET ssl_renegotiate.interval = '400ms';
\echo :LAST_ERROR_SQLSTATE
-- min_rekey_gap has a floor of 250ms (GnuTLS allows 8 key updates a
-- second, OpenSSL is to refuse them 100ms apart): refused from every level
SET ssl_renegotiate.min_rekey_gap = '100ms';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.min_rekey_gap = 0;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET ssl_renegotiate.min_rekey_gap = '100ms';
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_sslr_settings SET ssl_renegotiate.min_rekey_gap = '249ms';
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION regress_sslr_fn() RETURNS int LANGUAGE sql
    SET ssl_renegotiate.interval = '400ms' AS 'SELECT 1';
\echo :LAST_ERROR_SQLSTATE
-- ... while the floor itself, and the developer setting down to 0, are taken
SET ssl_renegotiate.min_rekey_gap = '250ms';
SHOW ssl_renegotiate.min_rekey_gap;
SET ssl_renegotiate.debug_min_rekey_gap = 0;
SHOW ssl_renegotiate.debug_min_rekey_gap;
RESET ssl_renegotiate.min_rekey_gap;
RESET ssl_renegotiate.debug_min_rekey_gap;
SELECT setrole::regrole, setdatabase <> 0 AS database, c AS setting
FROM pg_db_role_setting, unnest(setconfig) AS c
WHERE c LIKE 'ssl\_renegotiate.%';

-- SHOW prints the units people type; values that are not whole units are
-- rounded to the unit, as PostgreSQL rounds its own integer settings.
SET ssl_renegotiate.byte_limit = '1kB';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = '1536B';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = '100000B';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = 524288;
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = '1TB';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = '0.5GB';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.byte_limit = '1.5MB';
SHOW ssl_renegotiate.byte_limit;
SET ssl_renegotiate.interval = '1s';
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = '1000.4ms';
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = '1500ms';
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = 3600;
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = '30min';
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = '2min';
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.interval = 2000000;
SHOW ssl_renegotiate.interval;
SET ssl_renegotiate.min_rekey_gap = '1000.4ms';
SHOW ssl_renegotiate.min_rekey_gap;
SET ssl_renegotiate.byte_limit = 0;
SET ssl_renegotiate.hard_limit = '64MB';
SHOW ssl_renegotiate.hard_limit;
SET ssl_renegotiate.hard_limit = 0;
SET ssl_renegotiate.interval = 0;
SHOW ssl_renegotiate.interval;
SELECT name, setting, unit, vartype FROM pg_settings
WHERE name IN ('ssl_renegotiate.byte_limit', 'ssl_renegotiate.hard_limit',
               'ssl_renegotiate.interval', 'ssl_renegotiate.min_rekey_gap')
ORDER BY name;
RESET ALL;

-- No check looks at another setting: each level takes its value, and the
-- safe rule fits hard_limit to byte_limit in force (test/t/045 shows the
-- activity view's row).
SET ssl_renegotiate.hard_limit = '64MB';
SHOW ssl_renegotiate.hard_limit;
SET ssl_renegotiate.byte_limit = '1GB';
SET ssl_renegotiate.hard_limit = '1GB';
SHOW ssl_renegotiate.hard_limit;
SET ssl_renegotiate.byte_limit = '2GB';
SHOW ssl_renegotiate.byte_limit;
RESET ALL;
BEGIN;
SET LOCAL ssl_renegotiate.hard_limit = '100MB';
SET LOCAL ssl_renegotiate.byte_limit = '1GB';
SHOW ssl_renegotiate.byte_limit;
COMMIT;
ALTER SYSTEM SET ssl_renegotiate.hard_limit = '100MB';
ALTER SYSTEM SET ssl_renegotiate.byte_limit = '64kB';
ALTER SYSTEM SET ssl_renegotiate.hard_limit = '65MB';
ALTER SYSTEM SET ssl_renegotiate.byte_limit = '1GB';
ALTER SYSTEM RESET ssl_renegotiate.byte_limit;
ALTER SYSTEM RESET ssl_renegotiate.hard_limit;
ALTER ROLE regress_sslr_settings SET ssl_renegotiate.hard_limit = '100MB';
ALTER DATABASE contrib_regression SET ssl_renegotiate.byte_limit = '1GB';
SELECT setrole::regrole, setdatabase <> 0 AS database, c AS setting
FROM pg_db_role_setting, unnest(setconfig) AS c
WHERE c LIKE 'ssl\_renegotiate.%'
ORDER BY 1;
ALTER DATABASE contrib_regression RESET ssl_renegotiate.byte_limit;
DROP ROLE regress_sslr_settings;

-- Lines of the configuration files that are refused: none here.
SHOW ssl_renegotiate.refused_settings;

-- The 1.0 name is read from the configuration files only (test/t/015).
SET ssl_renegotiate."limit" = '64kB';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET ssl_renegotiate."limit" = '64kB';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM pg_settings WHERE name = 'ssl_renegotiate.limit';

-- The prefix is reserved: a misspelt setting is an error, not a placeholder.
SET ssl_renegotiate.byte_limitt = '64kB';
\echo :LAST_ERROR_SQLSTATE

-- The core name from PostgreSQL 9.4 is still a dummy, untouched by us.
SHOW ssl_renegotiation_limit;

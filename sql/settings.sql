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
SET ssl_renegotiate.tls12 = 'sometimes';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.tls12 = '';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.log_rekeys = 'perhaps';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.max_peer_key_updates = -5;
\echo :LAST_ERROR_SQLSTATE

-- The prefix is reserved: a misspelt setting is an error, not a placeholder.
SET ssl_renegotiate.byte_limitt = '64kB';
\echo :LAST_ERROR_SQLSTATE

-- The core name from PostgreSQL 9.4 is still a dummy, untouched by us.
SHOW ssl_renegotiation_limit;

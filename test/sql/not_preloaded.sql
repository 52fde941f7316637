--
-- Without shared_preload_libraries: CREATE EXTENSION works, every function
-- says what to add to postgresql.conf.
--
CREATE EXTENSION ssl_renegotiate;
SELECT * FROM ssl_renegotiate_activity;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ssl_renegotiate_totals;
\echo :LAST_ERROR_SQLSTATE
SELECT ssl_renegotiate_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ssl_renegotiate_database_role_totals;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ssl_renegotiate_database_role_totals_info;
\echo :LAST_ERROR_SQLSTATE
SELECT ssl_renegotiate_reset_database_role_totals();
\echo :LAST_ERROR_SQLSTATE
SELECT ssl_renegotiate_bytes_sent();
\echo :LAST_ERROR_SQLSTATE
SELECT ssl_renegotiate_rekeys_received();
\echo :LAST_ERROR_SQLSTATE
-- Nor are the settings defined.
SELECT count(*) FROM pg_settings WHERE name LIKE 'ssl\_renegotiate.%';
DROP EXTENSION ssl_renegotiate;

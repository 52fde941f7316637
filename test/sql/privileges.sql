--
-- Privileges: what an ordinary role may and may not do.
--
CREATE ROLE regress_sslr_user LOGIN;
CREATE ROLE regress_sslr_reader LOGIN IN ROLE pg_read_all_stats;
SELECT pg_backend_pid() AS superuser_pid \gset

SET ROLE regress_sslr_user;

-- Reading is allowed (rows of other roles carry NULL counters).
SELECT count(*) >= 0 AS can_read_activity FROM ssl_renegotiate_activity;
SELECT count(*) AS totals_rows FROM ssl_renegotiate_totals;
SELECT count(*) >= 0 AS can_read_database_role_totals FROM ssl_renegotiate_database_role_totals;
SELECT count(*) AS database_role_totals_info_rows FROM ssl_renegotiate_database_role_totals_info;
SELECT ssl_renegotiate_bytes_sent() IS NULL AS own_counter_null_without_tls;

-- Resetting is not.
SELECT ssl_renegotiate_reset();
\echo :LAST_ERROR_SQLSTATE
SELECT ssl_renegotiate_reset_database_role_totals();
\echo :LAST_ERROR_SQLSTATE
SELECT ssl_renegotiate_reset_database_role_totals(0, 'regress_sslr_user'::regrole);
\echo :LAST_ERROR_SQLSTATE

-- Nor is weakening the settings, in a session or for the cluster.
SET ssl_renegotiate.byte_limit = 0;
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.hard_limit = 0;
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.tls12 = 'warn';
\echo :LAST_ERROR_SQLSTATE
SET ssl_renegotiate.max_peer_key_updates = 0;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET ssl_renegotiate.byte_limit = 0;
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE regress_sslr_user SET ssl_renegotiate.byte_limit = 0;
\echo :LAST_ERROR_SQLSTATE

-- Nor rotating the keys of a superuser's backend (as pg_cancel_backend).
SELECT ssl_renegotiate_rekey(:superuser_pid);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- A superuser may set them per role; the role then gets them at login.
ALTER ROLE regress_sslr_user SET ssl_renegotiate.byte_limit = '1MB';
SELECT unnest(setconfig) FROM pg_db_role_setting
WHERE setrole = 'regress_sslr_user'::regrole;
ALTER ROLE regress_sslr_user RESET ALL;

-- Granting EXECUTE on reset is the supported way to delegate it.
GRANT EXECUTE ON FUNCTION ssl_renegotiate_reset() TO regress_sslr_reader;
SET ROLE regress_sslr_reader;
SELECT ssl_renegotiate_reset();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION ssl_renegotiate_reset() FROM regress_sslr_reader;
GRANT EXECUTE ON FUNCTION ssl_renegotiate_reset_database_role_totals(oid, oid)
    TO regress_sslr_reader;
SET ROLE regress_sslr_reader;
SELECT ssl_renegotiate_reset_database_role_totals(userid => 'regress_sslr_user'::regrole);
SELECT ssl_renegotiate_reset_database_role_totals();
RESET ROLE;
REVOKE EXECUTE ON FUNCTION ssl_renegotiate_reset_database_role_totals(oid, oid)
    FROM regress_sslr_reader;

DROP ROLE regress_sslr_user;
DROP ROLE regress_sslr_reader;

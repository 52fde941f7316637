/* ssl_renegotiate--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.3'" to load this file. \quit

-- 1.3 changes no function's signature and no view's columns: what other
-- roles' traffic a reader sees is decided in the library (1.3's, which
-- serves every installed version alike), so that an installation not yet
-- updated is as private as an updated one.  Nothing here writes a system
-- catalog: every statement is one a user could type.

-- Section: the function an update from 1.0 or 1.1 kept.
--
-- The update to 1.2 keeps ssl_renegotiate_activity() (no argument) when an
-- object outside the extension calls it, with a WARNING.  As a member of
-- the extension it is left out of pg_dump's output, and a restore, which
-- makes a fresh installation without it, loses the user's objects that
-- call it.  Here it leaves the extension and becomes the user's own
-- object, dumped and restored with the objects that need it; the library
-- keeps serving it.  A fresh installation has no such function.  A
-- WARNING, not a NOTICE: PostgreSQL runs an extension's script with
-- client_min_messages at WARNING or above, so a NOTICE would reach no one.
DO LANGUAGE plpgsql $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_depend
               WHERE classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                 AND objid = pg_catalog.to_regprocedure('ssl_renegotiate_activity()')
                 AND refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                 AND deptype = 'e') THEN
        ALTER EXTENSION ssl_renegotiate DROP FUNCTION ssl_renegotiate_activity();
        RAISE WARNING 'function ssl_renegotiate_activity() is no longer part of the extension'
            USING DETAIL = 'It was kept by an earlier update because other objects call it; pg_dump now dumps it with them.',
                  HINT = 'Once they read the view ssl_renegotiate_activity instead, drop the function with DROP FUNCTION ssl_renegotiate_activity().';
    END IF;
END
$$;

-- Section: who sees what, where \dv+ shows it.
COMMENT ON VIEW ssl_renegotiate_activity IS
    'TLS traffic of each backend; counters of other roles'' backends only for pg_read_all_stats';
COMMENT ON VIEW ssl_renegotiate_totals IS
    'TLS traffic of the whole cluster since stats_reset; counters for pg_read_all_stats only';
COMMENT ON VIEW ssl_renegotiate_database_role_totals IS
    'TLS traffic per database and role since stats_reset; other roles'' rows only for pg_read_all_stats';

-- Section: the activity view's 1.3 columns.
--
-- renegotiations_deferred: TLS 1.2 renegotiations of the server's that
-- waited because application data from the client was waiting (a client
-- that pipelines its next query behind a COPY); only hard_limit bounds a
-- key meanwhile.  The columns come from a function of their own, joined on
-- pid, so that 1.2's function keeps its signature, and the view, replaced
-- in place, keeps its columns (only appended to), its privileges and the
-- views built on it.  Like 1.2's, it shows the counters of other roles'
-- backends only to pg_read_all_stats.
CREATE FUNCTION ssl_renegotiate_activity_1_3(
    pid integer,
    OUT pid integer,
    OUT renegotiations_deferred bigint
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_activity_1_3'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

CREATE OR REPLACE VIEW ssl_renegotiate_activity AS
    SELECT a.*, x.renegotiations_deferred
    FROM ssl_renegotiate_activity(NULL::integer) a
         LEFT JOIN ssl_renegotiate_activity_1_3(NULL::integer) x USING (pid);

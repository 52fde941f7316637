/* ssl_renegotiate--1.0--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2'" to load this file. \quit

-- The direct path from 1.0: ALTER EXTENSION UPDATE takes it rather than
-- 1.0 -> 1.1 -> 1.2, so that no object a user's grant or view refers to is
-- dropped.  It makes exactly what 1.0 -> 1.1 -> 1.2 makes.

-- Section: what 1.1 added (ssl_renegotiate_rekey), then the activity view.
--
-- 1.0 -> 1.1 drops the view and its function and creates them again: that
-- resets their privileges and fails on a user's view built on ours.  This
-- path does what 1.1 -> 1.2 does instead, from 1.0's 23-column function:
-- the three columns 1.1 added and 1.2's four are appended together.

-- Rotate one backend's keys, both ways, at its next I/O.  Everyone may
-- call it; it checks, as pg_cancel_backend does, that the caller may
-- signal that backend.
CREATE FUNCTION ssl_renegotiate_rekey(pid integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ssl_renegotiate_rekey_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

-- The activity view (as ssl_renegotiate--1.1--1.2.sql).
--
-- The view gains four columns at its end: the limits the backend enforces,
-- as it sees its settings after role, database and session settings.
-- byte_limit and hard_limit in bytes, rekey_interval an interval, each
-- NULL when off; tls12, what a TLS 1.2 connection does at a limit (a
-- walsender's "renegotiate" is in force as "warn").
--
-- Nothing a user's grant or view refers to is dropped.  A function's OUT
-- columns cannot change in place, so the rows come from a new function,
-- ssl_renegotiate_activity(pid integer) (NULL: every backend, as
-- pg_stat_get_activity(pid)), which coexists with the old one: it has no
-- DEFAULT, so ssl_renegotiate_activity() still means the old one.  The
-- view is replaced in place over it: its columns only grow, so the views
-- built on it and its privileges stay.  The new function takes the old
-- one's owner and privileges (a view's readers need EXECUTE on the
-- functions it calls), and the old one is dropped unless an object outside
-- the extension calls it; then it stays, with a WARNING.
CREATE FUNCTION ssl_renegotiate_activity(
    pid integer,
    OUT pid integer,
    OUT usesysid oid,
    OUT backend_type text,
    OUT version text,
    OUT cipher text,
    OUT bytes_sent bigint,
    OUT bytes_received bigint,
    OUT records_sent bigint,
    OUT records_received bigint,
    OUT rekeys_sent bigint,
    OUT rekeys_received bigint,
    OUT rekey_failures bigint,
    OUT rekey_time double precision,
    OUT last_rekey timestamptz,
    OUT sent_since_rekey bigint,
    OUT received_since_rekey bigint,
    OUT max_sent_per_key bigint,
    OUT max_received_per_key bigint,
    OUT rekey_pending boolean,
    OUT rekeys_skipped bigint,
    OUT renegotiations_refused bigint,
    OUT records_sent_since_rekey bigint,
    OUT records_received_since_rekey bigint,
    OUT record_limit bigint,
    OUT rekey_requests bigint,
    OUT rekey_requested boolean,
    OUT byte_limit bigint,
    OUT hard_limit bigint,
    OUT rekey_interval interval,
    OUT tls12 text
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_activity_1_2'
LANGUAGE C CALLED ON NULL INPUT VOLATILE PARALLEL RESTRICTED;

CREATE OR REPLACE VIEW ssl_renegotiate_activity AS
    SELECT * FROM ssl_renegotiate_activity(NULL::integer);

DO LANGUAGE plpgsql $$
DECLARE
    old_fn regprocedure := 'ssl_renegotiate_activity()'::regprocedure;
    new_fn regprocedure := 'ssl_renegotiate_activity(integer)'::regprocedure;
    old_name text := old_fn::text;
    owner_role regrole;
    old_acl aclitem[];
    saved_role text := current_setting('role');
    item record;
    dependents text;
BEGIN
    SELECT proowner, proacl INTO owner_role, old_acl
    FROM pg_catalog.pg_proc WHERE oid = old_fn;
    EXECUTE format('ALTER FUNCTION %s OWNER TO %s', new_fn, owner_role);

    -- The old function's privileges, entry by entry in their order (a
    -- grantor's grant option comes before its grants), each by its grantor.
    IF old_acl IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, %s', new_fn, owner_role);
        FOR item IN
            SELECT e.grantor::regrole AS grantor, r.rolname AS grantor_name,
                   CASE WHEN e.grantee = 0 THEN 'PUBLIC'
                        ELSE e.grantee::regrole::text END AS grantee,
                   CASE WHEN e.is_grantable THEN ' WITH GRANT OPTION'
                        ELSE '' END AS option
            FROM unnest(old_acl) WITH ORDINALITY AS u(item, n),
                 LATERAL pg_catalog.aclexplode(ARRAY[u.item]) AS e
                 JOIN pg_catalog.pg_roles r ON r.oid = e.grantor
            ORDER BY u.n
        LOOP
            BEGIN
                IF item.grantor <> owner_role THEN
                    PERFORM pg_catalog.set_config('role', item.grantor_name, true);
                END IF;
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
                               new_fn, item.grantee, item.option);
            EXCEPTION WHEN insufficient_privilege THEN
                -- never fail the update over a grantor: the owner grants
                PERFORM pg_catalog.set_config('role', saved_role, true);
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
                               new_fn, item.grantee, item.option);
            END;
            PERFORM pg_catalog.set_config('role', saved_role, true);
        END LOOP;

        -- Those GRANTs ran inside the extension's script, so PostgreSQL took
        -- them for the extension's own initial privileges (pg_init_privs),
        -- and pg_dump would leave them out.  The old function had none
        -- (neither 1.0 nor 1.1 grants on it): neither has the new one, nor
        -- the dependencies on roles PostgreSQL 17 and later record for them.
        DELETE FROM pg_catalog.pg_init_privs
        WHERE objoid = new_fn AND classoid = 'pg_catalog.pg_proc'::regclass;
        DELETE FROM pg_catalog.pg_shdepend
        WHERE dbid = (SELECT oid FROM pg_catalog.pg_database
                      WHERE datname = pg_catalog.current_database())
          AND classid = 'pg_catalog.pg_proc'::regclass AND objid = new_fn
          AND deptype = 'i';
    END IF;

    BEGIN
        EXECUTE format('DROP FUNCTION %s', old_fn);
    EXCEPTION WHEN dependent_objects_still_exist THEN
        GET STACKED DIAGNOSTICS dependents = PG_EXCEPTION_DETAIL;
        RAISE WARNING 'function % is kept because other objects depend on it', old_name
            USING DETAIL = dependents,
                  HINT = format('Once they read the view ssl_renegotiate_activity instead, drop the function with ALTER EXTENSION ssl_renegotiate DROP FUNCTION %s and DROP FUNCTION %s.', old_name, old_name);
    END;
END
$$;

-- Section: totals per database and role (as in ssl_renegotiate--1.1--1.2.sql).
-- One row per (database, role): its sessions that exited since
-- stats_reset, plus the live ones the caller may see (README, "Who sees
-- what").  dbid 0: walsenders without a database.
CREATE FUNCTION ssl_renegotiate_database_role_totals(
    OUT dbid oid,
    OUT userid oid,
    OUT connections bigint,
    OUT bytes_sent bigint,
    OUT bytes_received bigint,
    OUT records_sent bigint,
    OUT records_received bigint,
    OUT rekeys_sent bigint,
    OUT rekeys_received bigint,
    OUT rekey_failures bigint,
    OUT rekey_time double precision,
    OUT rekeys_skipped bigint,
    OUT renegotiations_refused bigint,
    OUT terminations bigint,
    OUT stats_reset timestamptz
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_database_role_totals_1_2'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW ssl_renegotiate_database_role_totals AS
    SELECT t.dbid, d.datname, t.userid, r.rolname AS usename,
           t.connections, t.bytes_sent, t.bytes_received,
           t.records_sent, t.records_received,
           t.rekeys_sent, t.rekeys_received, t.rekey_failures, t.rekey_time,
           t.rekeys_skipped, t.renegotiations_refused, t.terminations,
           t.stats_reset
    FROM ssl_renegotiate_database_role_totals() t
         LEFT JOIN pg_catalog.pg_database d ON d.oid = t.dbid
         LEFT JOIN pg_catalog.pg_roles r ON r.oid = t.userid;

-- The table as a whole, as pg_stat_statements_info: entries evicted to
-- make room (ssl_renegotiate.max_database_role_totals) since stats_reset.
CREATE FUNCTION ssl_renegotiate_database_role_totals_info(
    OUT evicted bigint,
    OUT stats_reset timestamptz
)
RETURNS record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_database_role_totals_info_1_2'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW ssl_renegotiate_database_role_totals_info AS
    SELECT * FROM ssl_renegotiate_database_role_totals_info();

-- Zero the rows of one database, one role, or both (NULL: any); with
-- neither, the whole table and its evicted count.
CREATE FUNCTION ssl_renegotiate_reset_database_role_totals(
    dbid oid DEFAULT NULL,
    userid oid DEFAULT NULL
)
RETURNS void
AS 'MODULE_PATHNAME', 'ssl_renegotiate_reset_database_role_totals_1_2'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

GRANT SELECT ON ssl_renegotiate_database_role_totals,
    ssl_renegotiate_database_role_totals_info TO PUBLIC;
REVOKE ALL ON FUNCTION ssl_renegotiate_reset_database_role_totals(oid, oid) FROM PUBLIC;

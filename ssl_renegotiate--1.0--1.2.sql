/* ssl_renegotiate--1.0--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2'" to load this file. \quit

-- The direct path from 1.0: ALTER EXTENSION UPDATE takes it rather than
-- 1.0 -> 1.1 -> 1.2, so that no object a user's grant or view refers to is
-- dropped.  It makes exactly what 1.0 -> 1.1 -> 1.2 makes.

-- Section: what 1.1 added (ssl_renegotiate_rekey), and the activity view.
-- (for now as 1.0 -> 1.1 does it; to be made non-destructive)
DROP VIEW ssl_renegotiate_activity;
DROP FUNCTION ssl_renegotiate_activity();

CREATE FUNCTION ssl_renegotiate_activity(
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
    OUT rekey_requested boolean
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_activity_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW ssl_renegotiate_activity AS
    SELECT * FROM ssl_renegotiate_activity();

GRANT SELECT ON ssl_renegotiate_activity TO PUBLIC;

-- Rotate one backend's keys, both ways, at its next I/O.  Everyone may
-- call it; it checks, as pg_cancel_backend does, that the caller may
-- signal that backend.
CREATE FUNCTION ssl_renegotiate_rekey(pid integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'ssl_renegotiate_rekey_1_1'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

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

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

/* ssl_renegotiate--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION ssl_renegotiate" to load this file. \quit

-- One row per live backend on a TLS connection (client backends and
-- walsenders).  Counters of other roles' backends are NULL unless the
-- caller has pg_read_all_stats or that role's privileges.
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
    OUT records_received_since_rekey bigint
)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_activity_1_0'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW ssl_renegotiate_activity AS
    SELECT * FROM ssl_renegotiate_activity();

-- Cluster-wide sums since stats_reset: exited backends plus live ones.
CREATE FUNCTION ssl_renegotiate_totals(
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
RETURNS record
AS 'MODULE_PATHNAME', 'ssl_renegotiate_totals_1_0'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

CREATE VIEW ssl_renegotiate_totals AS
    SELECT * FROM ssl_renegotiate_totals();

CREATE FUNCTION ssl_renegotiate_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'ssl_renegotiate_reset_1_0'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

-- Everyone may read, as with pg_stat_activity; only superusers (and roles
-- granted EXECUTE) may reset.
GRANT SELECT ON ssl_renegotiate_activity, ssl_renegotiate_totals TO PUBLIC;
REVOKE ALL ON FUNCTION ssl_renegotiate_reset() FROM PUBLIC;

-- This session's own counters; NULL on a connection without TLS.
CREATE FUNCTION ssl_renegotiate_bytes_sent() RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION ssl_renegotiate_bytes_received() RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION ssl_renegotiate_records_sent() RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION ssl_renegotiate_records_received() RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION ssl_renegotiate_rekeys_sent() RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
CREATE FUNCTION ssl_renegotiate_rekeys_received() RETURNS bigint
AS 'MODULE_PATHNAME' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

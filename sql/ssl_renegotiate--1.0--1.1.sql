/* ssl_renegotiate--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1'" to load this file. \quit

-- The activity view gains three columns at its end: the confidentiality
-- limit in force (records per key; NULL when the cipher has none) and the
-- operator's requests for new keys (ssl_renegotiate_rekey).  A function's
-- OUT parameters cannot change in place: drop and create both again.
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

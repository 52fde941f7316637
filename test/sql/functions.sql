--
-- Functions: session accessors on a connection without TLS, and reset.
--
SELECT ssl_renegotiate_bytes_sent() IS NULL AS bytes_sent_null,
       ssl_renegotiate_bytes_received() IS NULL AS bytes_received_null,
       ssl_renegotiate_records_sent() IS NULL AS records_sent_null,
       ssl_renegotiate_records_received() IS NULL AS records_received_null,
       ssl_renegotiate_rekeys_sent() IS NULL AS rekeys_sent_null,
       ssl_renegotiate_rekeys_received() IS NULL AS rekeys_received_null;

-- Reset zeroes the totals and moves stats_reset forward.
SELECT stats_reset AS before_reset FROM ssl_renegotiate_totals \gset
SELECT pg_sleep(0.01);
SELECT ssl_renegotiate_reset();
SELECT connections, bytes_sent, bytes_received, records_sent,
       records_received, rekeys_sent, rekeys_received, rekey_failures,
       rekey_time, rekeys_skipped, renegotiations_refused, terminations,
       stats_reset > :'before_reset' AS reset_moved
FROM ssl_renegotiate_totals;

-- Rotation on demand: false, with a WARNING that says why, for a pid of no
-- backend and for a backend without TLS (this one: its WARNING names its
-- pid, so it is hidden here; test/t/014 checks it); NULL for NULL.
SELECT ssl_renegotiate_rekey(2147483647);
SET client_min_messages = error;
SELECT ssl_renegotiate_rekey(pg_backend_pid());
RESET client_min_messages;
SELECT ssl_renegotiate_rekey(NULL) IS NULL AS null_pid;

-- Bad arguments: reset takes none, the rows take a pid (NULL: all).
SELECT ssl_renegotiate_reset(1);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ssl_renegotiate_activity('a', 'b');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_of_no_backend FROM ssl_renegotiate_activity(42);

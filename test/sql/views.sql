--
-- Views: columns and types (the contract), and what a connection without
-- TLS sees.
--
SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relname IN ('ssl_renegotiate_activity', 'ssl_renegotiate_totals')
  AND a.attnum > 0
ORDER BY c.relname, a.attnum;

-- This regression session uses a Unix socket: it has no TLS row, and the
-- view joins with pg_stat_ssl / pg_stat_activity on pid.
SELECT count(*) FROM ssl_renegotiate_activity WHERE pid = pg_backend_pid();
SELECT count(*)
FROM ssl_renegotiate_activity r
JOIN pg_stat_ssl s USING (pid)
JOIN pg_stat_activity a USING (pid)
WHERE NOT s.ssl;

-- Totals: exactly one row, never negative.
SELECT count(*) FROM ssl_renegotiate_totals;
SELECT connections >= 0 AS connections_ok,
       bytes_sent >= 0 AND bytes_received >= 0 AS bytes_ok,
       records_sent >= 0 AND records_received >= 0 AS records_ok,
       stats_reset IS NOT NULL AS has_reset_time
FROM ssl_renegotiate_totals;

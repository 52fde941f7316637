--
-- Installation: the extension and every object it creates.
--
CREATE EXTENSION ssl_renegotiate;

SELECT pg_describe_object(classid, objid, objsubid) AS object
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ssl_renegotiate')
  AND deptype = 'e'
ORDER BY 1;

-- Functions reading this connection's TLS state are PARALLEL RESTRICTED.
SELECT proname, provolatile, proparallel, proisstrict
FROM pg_proc
WHERE proname LIKE 'ssl\_renegotiate\_%'
ORDER BY proname;

-- Version 1.3, relocatable, and installed by a superuser only.
SELECT extname, extversion, extrelocatable
FROM pg_extension WHERE extname = 'ssl_renegotiate';

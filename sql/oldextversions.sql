--
-- Versions: 1.0 as released, served by this library until the update;
-- ALTER EXTENSION UPDATE to 1.1 gives exactly the objects of a fresh
-- CREATE EXTENSION; and the extension moves to another schema.
--

-- What a fresh installation (the default version) consists of.
CREATE TEMP VIEW sslr_objects AS
SELECT pg_describe_object(classid, objid, objsubid) AS object
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ssl_renegotiate')
  AND deptype = 'e';
CREATE TEMP VIEW sslr_columns AS
SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS type
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
WHERE c.relname IN ('ssl_renegotiate_activity', 'ssl_renegotiate_totals',
                    'ssl_renegotiate_database_role_totals',
                    'ssl_renegotiate_database_role_totals_info')
  AND c.relkind = 'v' AND a.attnum > 0;
CREATE TEMP VIEW sslr_functions AS
SELECT p.oid::regprocedure::text AS function, pg_get_function_result(p.oid) AS result,
       provolatile, proparallel, proisstrict, prosrc
FROM pg_proc p
WHERE proname LIKE 'ssl\_renegotiate\_%';
CREATE TEMP TABLE fresh_objects AS SELECT * FROM sslr_objects;
CREATE TEMP TABLE fresh_columns AS SELECT * FROM sslr_columns;
CREATE TEMP TABLE fresh_functions AS SELECT * FROM sslr_functions;

-- 1.0, as released.
DROP EXTENSION ssl_renegotiate;
CREATE EXTENSION ssl_renegotiate VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate';
SELECT count(*) AS activity_columns FROM sslr_columns
WHERE relname = 'ssl_renegotiate_activity';
SELECT prosrc FROM pg_proc WHERE proname = 'ssl_renegotiate_activity';
SELECT count(*) >= 0 AS activity_1_0_works FROM ssl_renegotiate_activity;
SELECT count(*) AS rekey_function FROM pg_proc WHERE proname = 'ssl_renegotiate_rekey';

-- The update.
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate';
SELECT count(*) >= 0 AS activity_1_1_works FROM ssl_renegotiate_activity;
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2';

-- Exactly what a fresh installation has: no row in either direction.
(SELECT * FROM sslr_objects EXCEPT SELECT * FROM fresh_objects)
UNION ALL
(SELECT * FROM fresh_objects EXCEPT SELECT * FROM sslr_objects);
(SELECT * FROM sslr_columns EXCEPT SELECT * FROM fresh_columns)
UNION ALL
(SELECT * FROM fresh_columns EXCEPT SELECT * FROM sslr_columns);
(SELECT * FROM sslr_functions EXCEPT SELECT * FROM fresh_functions)
UNION ALL
(SELECT * FROM fresh_functions EXCEPT SELECT * FROM sslr_functions);
SELECT has_table_privilege('public', 'ssl_renegotiate_activity', 'SELECT') AS public_may_read;

-- Relocatable: the objects move together and keep working.
CREATE SCHEMA regress_sslr_elsewhere;
ALTER EXTENSION ssl_renegotiate SET SCHEMA regress_sslr_elsewhere;
SELECT count(*) >= 0 AS moved_view_works FROM regress_sslr_elsewhere.ssl_renegotiate_activity;
SELECT count(*) AS totals_rows FROM regress_sslr_elsewhere.ssl_renegotiate_totals;
ALTER EXTENSION ssl_renegotiate SET SCHEMA public;
DROP SCHEMA regress_sslr_elsewhere;

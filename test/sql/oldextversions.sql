--
-- Versions: 1.0, 1.1 and 1.2 as released, served by this library until
-- the update; every update path to 1.3 gives exactly what a fresh CREATE
-- EXTENSION gives; and the extension moves to another schema.
--

-- The paths ALTER EXTENSION UPDATE may take: from 1.0 the direct script
-- to 1.2, the shortest path, not 1.0 -> 1.1 -> 1.2; to 1.3 through 1.2.
SELECT source, target, path FROM pg_extension_update_paths('ssl_renegotiate')
WHERE path IS NOT NULL ORDER BY source, target;

-- Everything an installation consists of, one row per fact: its objects,
-- the columns and definitions of its views, the attributes of its
-- functions, their privileges, their initial privileges (what pg_dump
-- takes for the extension's own), and the comments of its objects.
CREATE TEMP VIEW sslr_members AS
SELECT classid, objid, objsubid FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ssl_renegotiate')
  AND deptype = 'e';
CREATE TEMP VIEW sslr_state AS
SELECT 'object' AS kind, pg_describe_object(classid, objid, objsubid) AS name,
       '' AS fact
FROM sslr_members
UNION ALL
SELECT 'column', c.relname || '.' || a.attnum,
       a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
FROM sslr_members m JOIN pg_class c ON c.oid = m.objid
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
WHERE m.classid = 'pg_class'::regclass
UNION ALL
SELECT 'view', c.relname, pg_get_viewdef(c.oid) || ' acl ' || coalesce(c.relacl::text, 'default')
FROM sslr_members m JOIN pg_class c ON c.oid = m.objid
WHERE m.classid = 'pg_class'::regclass
UNION ALL
SELECT 'function', p.oid::regprocedure::text,
       concat_ws(' | ', pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
                 p.provolatile, p.proparallel, p.proisstrict, p.prosecdef,
                 p.procost, p.prorows, p.prosrc, p.probin,
                 'acl ' || coalesce(p.proacl::text, 'default'))
FROM sslr_members m JOIN pg_proc p ON p.oid = m.objid
WHERE m.classid = 'pg_proc'::regclass
UNION ALL
SELECT 'initial privileges', pg_describe_object(i.classoid, i.objoid, i.objsubid),
       i.privtype::text || ' ' || i.initprivs::text
FROM sslr_members m JOIN pg_init_privs i
  ON i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = m.objsubid
UNION ALL
SELECT 'comment', pg_describe_object(m.classid, m.objid, m.objsubid), d.description
FROM sslr_members m JOIN pg_description d
  ON d.classoid = m.classid AND d.objoid = m.objid AND d.objsubid = m.objsubid;

-- A fresh installation of the default version, 1.3.
CREATE TEMP TABLE fresh_state AS SELECT * FROM sslr_state;
SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate';
SELECT kind, count(*) FROM fresh_state WHERE kind <> 'object' GROUP BY kind ORDER BY kind;

-- What differs from the fresh installation: no row in either direction.
CREATE TEMP VIEW sslr_differences AS
(SELECT 'only here' AS side, * FROM sslr_state EXCEPT SELECT 'only here', * FROM fresh_state)
UNION ALL
(SELECT 'only fresh', * FROM fresh_state EXCEPT SELECT 'only fresh', * FROM sslr_state);

-- 1.0, as released, served by this library.
DROP EXTENSION ssl_renegotiate;
CREATE EXTENSION ssl_renegotiate VERSION '1.0';
SELECT count(*) AS activity_columns FROM pg_attribute
WHERE attrelid = 'ssl_renegotiate_activity'::regclass AND attnum > 0;
SELECT prosrc FROM pg_proc WHERE proname = 'ssl_renegotiate_activity';
SELECT count(*) >= 0 AS activity_1_0_works FROM ssl_renegotiate_activity;
SELECT count(*) AS rekey_function FROM pg_proc WHERE proname = 'ssl_renegotiate_rekey';

-- Path 1.0 -> 1.1 -> 1.2 -> 1.3.  1.1, as released, served by this library.
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.1';
SELECT count(*) AS activity_columns FROM pg_attribute
WHERE attrelid = 'ssl_renegotiate_activity'::regclass AND attnum > 0;
SELECT prosrc FROM pg_proc WHERE proname = 'ssl_renegotiate_activity';
SELECT count(*) >= 0 AS activity_1_1_works FROM ssl_renegotiate_activity;
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2';
SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate';
-- 1.2, as released: what 1.3 adds (a column, its function, the comments)
SELECT side, kind, name FROM sslr_differences ORDER BY 1, 2, 3;
SELECT count(*) >= 0 AS activity_1_2_works FROM ssl_renegotiate_activity;
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.3';
SELECT * FROM sslr_differences ORDER BY 1, 2, 3;

-- Path 1.1 -> 1.2 -> 1.3.
DROP EXTENSION ssl_renegotiate;
CREATE EXTENSION ssl_renegotiate VERSION '1.1';
ALTER EXTENSION ssl_renegotiate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate';
SELECT * FROM sslr_differences ORDER BY 1, 2, 3;

-- Path 1.2 -> 1.3.
DROP EXTENSION ssl_renegotiate;
CREATE EXTENSION ssl_renegotiate VERSION '1.2';
ALTER EXTENSION ssl_renegotiate UPDATE;
SELECT * FROM sslr_differences ORDER BY 1, 2, 3;

-- Path 1.0 -> 1.2 -> 1.3 by a plain UPDATE, with a user's view on ours:
-- 1.0 -> 1.1 would fail on it (it drops the view), the direct script keeps
-- it.
DROP EXTENSION ssl_renegotiate;
CREATE EXTENSION ssl_renegotiate VERSION '1.0';
CREATE VIEW regress_sslr_myview AS SELECT pid, bytes_sent FROM ssl_renegotiate_activity;
ALTER EXTENSION ssl_renegotiate UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'ssl_renegotiate';
SELECT * FROM sslr_differences ORDER BY 1, 2, 3;
SELECT count(*) >= 0 AS user_view_works FROM regress_sslr_myview;
DROP VIEW regress_sslr_myview;

-- A user's object that calls the old function itself: the update to 1.2
-- goes on, and keeps that function in the extension (with a WARNING that
-- names what needs it); 1.3 hands it to the user (with a WARNING), so that
-- pg_dump dumps it with the view that needs it.
DROP EXTENSION ssl_renegotiate;
CREATE EXTENSION ssl_renegotiate VERSION '1.1';
CREATE VIEW regress_sslr_direct AS SELECT pid FROM ssl_renegotiate_activity();
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.2';
SELECT side, kind, name FROM sslr_differences WHERE kind = 'object' ORDER BY 1, 2, 3;
ALTER EXTENSION ssl_renegotiate UPDATE TO '1.3';
SELECT * FROM sslr_differences ORDER BY 1, 2, 3;
SELECT oid::regprocedure AS users_own FROM pg_proc WHERE proname = 'ssl_renegotiate_activity'
  AND NOT EXISTS (SELECT FROM pg_depend WHERE objid = pg_proc.oid AND deptype = 'e');
SELECT count(*) >= 0 AS direct_view_works FROM regress_sslr_direct;
SELECT count(*) >= 0 AS activity_1_3_works FROM ssl_renegotiate_activity;
-- ... until the DBA moves it to the view, and drops the old function.
CREATE OR REPLACE VIEW regress_sslr_direct AS SELECT pid FROM ssl_renegotiate_activity;
DROP FUNCTION ssl_renegotiate_activity();
DROP VIEW regress_sslr_direct;

-- An installation in another schema updates there.
DROP EXTENSION ssl_renegotiate;
CREATE SCHEMA regress_sslr_elsewhere;
CREATE EXTENSION ssl_renegotiate VERSION '1.0' SCHEMA regress_sslr_elsewhere;
REVOKE EXECUTE ON FUNCTION regress_sslr_elsewhere.ssl_renegotiate_activity() FROM PUBLIC;
ALTER EXTENSION ssl_renegotiate UPDATE;
SELECT oid::regprocedure AS function, proacl IS NOT NULL AS kept_acl
FROM pg_proc WHERE proname = 'ssl_renegotiate_activity';
SELECT has_function_privilege('public', 'regress_sslr_elsewhere.ssl_renegotiate_activity(integer)', 'EXECUTE') AS public_may_execute;
DROP EXTENSION ssl_renegotiate;
DROP SCHEMA regress_sslr_elsewhere;
CREATE EXTENSION ssl_renegotiate;

-- The new function: NULL is every backend, a pid only that backend's row.
SELECT count(*) AS no_row_for_no_backend FROM ssl_renegotiate_activity(0);
SELECT count(*) AS no_tls_row_here FROM ssl_renegotiate_activity(pg_backend_pid());

-- Relocatable: the objects move together and keep working.
CREATE SCHEMA regress_sslr_elsewhere;
ALTER EXTENSION ssl_renegotiate SET SCHEMA regress_sslr_elsewhere;
SELECT count(*) >= 0 AS moved_view_works FROM regress_sslr_elsewhere.ssl_renegotiate_activity;
SELECT count(*) AS totals_rows FROM regress_sslr_elsewhere.ssl_renegotiate_totals;
ALTER EXTENSION ssl_renegotiate SET SCHEMA public;
DROP SCHEMA regress_sslr_elsewhere;

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


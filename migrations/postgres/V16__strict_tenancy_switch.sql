-- dlm migration V16: strict tenancy, where the DBA wants it.
-- Applied in one transaction after V15, in the same schema; records
-- version 16. Re-runnable.
--
-- A clientId nobody bound is bound to the login that first uses it: a
-- convenience for a database one service uses, and a squat for a neighbour
-- that uses another service's name first. The DBA can now switch that off:
--
--   INSERT INTO dlm_config (name, value) VALUES ('first_use_binding', 'off')
--     ON CONFLICT (name) DO UPDATE SET value = excluded.value;
--
-- Then an acquire or a wait under an unbound clientId is refused (42501,
-- PERMISSION_DENIED) with a message naming `dlmctl clients bind`; bound
-- clientIds work as before. Without the row (or with 'on'), first use
-- binds as before. Read only when a client is not bound yet: no cost on
-- the calls of a bound client.
--
-- Rolling upgrade: the same signatures and, until the DBA switches it off,
-- the same behaviour. compatible_from = 4.

COMMENT ON TABLE dlm_config IS
  'dlm: settings: the role names recorded when migration V3 was first applied; first_use_binding (V16).';
COMMENT ON COLUMN dlm_config.name IS
  'client_role, admin_role, or first_use_binding (''off'': an unbound clientId is refused instead of bound to its first user).';
COMMENT ON COLUMN dlm_config.value IS
  'The role name later migrations grant to; for first_use_binding, on or off.';

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_client_for (internal): the binding of p_key's client, checked: the
-- key must be one of the two shapes (22023 otherwise), the login a member
-- of the client's role (42501 otherwise, naming both). An unbound client is
-- bound to the login when p_bind (acquire, wait) unless first-use binding
-- is off (42501, naming dlmctl clients bind: V16), else answered as a row
-- with a NULL client_id (release, extend, unregister: only holds and
-- requests made before V7 can be under an unbound client).
CREATE OR REPLACE FUNCTION dlm_client_for(p_key text, p_bind boolean, OUT client_id text, OUT separator text, OUT hierarchy boolean) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_client       text;
  v_row          record;
  v_lock_timeout text;
BEGIN
  v_client := dlm_scope_client(dlm_key_scope(p_key));
  IF v_client IS NULL THEN
    RAISE EXCEPTION 'dlm: "%" is not a lock key', dlm_shown_key(coalesce(p_key, ''))
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A key is DC#<farm>#<client>#<id> or XDC#<client>#<id>, none of farm, client and id empty, and farm and client without ''#''.';
  END IF;
  SELECT * INTO v_row FROM dlm_clients c WHERE c.client_id = v_client;
  IF NOT FOUND THEN
    IF NOT p_bind THEN
      RETURN;
    END IF;
    -- Strict tenancy (V16): the DBA switched first-use binding off.
    IF (SELECT c.value FROM dlm_config c WHERE c.name = 'first_use_binding')
       = 'off' THEN
      RAISE EXCEPTION 'dlm: client "%" is bound to no role and first-use binding is off: an admin binds it first (dlmctl clients bind % ROLE)',
        v_client, v_client
        USING ERRCODE = 'insufficient_privilege',
              HINT = format('SELECT dlm_bind_client(%L, <the service''s role>) as the admin role.', v_client);
    END IF;
    -- First use. A concurrent first use of the same client waits here for
    -- the other's transaction, then finds its row. Not bounded by the
    -- caller's lock_timeout (rowLockWait): that bound answers "the key is
    -- busy", and no key is. The call's statement_timeout bounds it.
    v_lock_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', '0', true);
    INSERT INTO dlm_clients AS c
        (client_id, role_oid, role_name, first_use, bound_by)
      SELECT v_client, r.oid, r.rolname, true, session_user
        FROM pg_roles r WHERE r.rolname = session_user
      ON CONFLICT (client_id) DO NOTHING;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    SELECT * INTO v_row FROM dlm_clients c WHERE c.client_id = v_client;
  END IF;
  IF NOT coalesce(pg_has_role(session_user, v_row.role_oid, 'MEMBER'), false) THEN
    RAISE EXCEPTION 'dlm: client "%" is bound to role "%"; login "%" is not a member of it',
      v_client,
      coalesce((SELECT r.rolname FROM pg_roles r WHERE r.oid = v_row.role_oid),
               v_row.role_name),
      session_user
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'GRANT that role to the login, or have an admin bind the client to the service''s role (dlmctl clients bind).';
  END IF;
  client_id := v_row.client_id;
  separator := v_row.separator;
  hierarchy := v_row.hierarchy;
END
$$;


-- Pinned to this schema as every dlm function is (V9's rule).
DO $$
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  EXECUTE format('ALTER FUNCTION dlm_client_for(text, boolean) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (16, 'first-use binding can be switched off', 4)
  ON CONFLICT (version) DO NOTHING;

-- dlm migration V10: a first use of a client that is waited for, and no
-- deadlock reported through another owner's own cycle. Applied in one
-- transaction after V9, in the same schema; records version 10.
-- Re-runnable.
--
-- - dlm_client_for: the first use of a client id (the INSERT that binds it
--   to the login's role) waits for a concurrent first use of the same id
--   without the caller's lock_timeout. Two processes starting together
--   used to see one of their first acquisitions answer "held by someone
--   else" (the lock_timeout of the wait for the other's binding, read as a
--   busy key) for a key nobody held. The call's statement_timeout still
--   bounds the wait.
-- - dlm_find_cycle no longer follows a request that its own owner's hold
--   blocks. Such a request is a cycle of one, and its owner's wait ends at
--   once: it is told DEADLOCK_DETECTED, or it finds that the hold is a
--   leftover of its own (an acquisition in doubt after a lost reply, a lazy
--   release a server crash undid) and releases it by token. Either way that
--   request is not something another owner can wait on forever. Before,
--   a second owner whose wait met such a request (right after a server
--   restart: the first owner's leftover in its way, the first owner's
--   request queued behind its own) was told DEADLOCK_DETECTED for a cycle
--   that was not one.
--
-- Rolling upgrade: two internal functions replaced, same signatures; every
-- library of schema 4 and later reaches them through the client functions
-- and gets the same answers, but for the false "busy" and the false cycles
-- above. compatible_from = 4.

-- ----------------------------------------------------------- functions

-- dlm_find_cycle (internal): the wait-for graph walked from a request of
-- p_owner (a digest) for p_key (its ancestors, descendant range and mode,
-- and its age p_my_at for the queue edges): the keys along a cycle back to
-- p_owner, starting with p_key, and the other owners on it; or '{}' and
-- '{}'. Breadth first, each owner once; a request of another owner that
-- its own hold blocks is not followed (that owner's wait ends at once).
-- At most 1,000 owners are visited: past that the walk stops and answers
-- '{}' (the wait goes on and ends at its timeout), so its work is bounded
-- whatever the graph. Runs as its caller (the schema owner).
CREATE OR REPLACE FUNCTION dlm_find_cycle(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_shared boolean, p_my_at timestamptz, p_owner text, p_now timestamptz,
    OUT cycle text[], OUT owners text[])
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_owners text[] := '{}';
  v_parent integer[] := '{}';
  v_via    text[] := '{}';
  v_next   integer := 1;
  v_at     integer;
  v_cycle  text[];
  v_hop    record;
BEGIN
  FOR v_hop IN
    SELECT DISTINCT b.owner_id
      FROM dlm_wait_blockers(p_key, p_ancestors, p_desc_begin, p_desc_end,
                             p_shared, p_my_at, p_owner, p_now) b
     ORDER BY b.owner_id
     LIMIT 1000
  LOOP
    -- The caller holds what blocks its own request: a cycle of one.
    IF v_hop.owner_id = p_owner THEN
      cycle := ARRAY[p_key];
      owners := '{}';
      RETURN;
    END IF;
    v_owners := v_owners || v_hop.owner_id;
    v_parent := v_parent || 0;
    v_via := v_via || p_key;
  END LOOP;

  WHILE v_next <= cardinality(v_owners) AND v_next <= 1000 LOOP
    FOR v_hop IN
      SELECT e.resource, e.owner_id
        FROM (SELECT r.resource, b.owner_id,
                     bool_or(b.owner_id = r.owner_id)
                       OVER (PARTITION BY r.resource) AS self_blocked
                FROM dlm_lock_requests r
                CROSS JOIN LATERAL dlm_wait_blockers(
                  r.resource, r.ancestors, r.desc_begin, r.desc_end,
                  r.mode = 'SHARED', r.requested_at, r.owner_id, p_now) b
               WHERE r.owner_id = v_owners[v_next]
                 AND r.expires_at > p_now) e
       WHERE NOT e.self_blocked
       ORDER BY e.resource, e.owner_id
    LOOP
      IF v_hop.owner_id = p_owner THEN
        v_cycle := ARRAY[v_hop.resource];
        v_at := v_next;
        owners := '{}';
        WHILE v_at > 0 LOOP
          v_cycle := v_via[v_at] || v_cycle;
          owners := owners || v_owners[v_at];
          v_at := v_parent[v_at];
        END LOOP;
        cycle := v_cycle;
        RETURN;
      END IF;
      IF cardinality(v_owners) < 1000
         AND NOT (v_hop.owner_id = ANY (v_owners)) THEN
        v_owners := v_owners || v_hop.owner_id;
        v_parent := v_parent || v_next;
        v_via := v_via || v_hop.resource;
      END IF;
    END LOOP;
    v_next := v_next + 1;
  END LOOP;
  cycle := '{}';
  owners := '{}';
END
$$;

-- dlm_client_for (internal): the binding of p_key's client, checked: the
-- login must be a member of its role (42501 otherwise, naming both). An
-- unbound client is bound to the login when p_bind (acquire, wait), else
-- answered as a row with a NULL client_id (release, extend, unregister:
-- only holds and requests made before V7 can be under an unbound client).
CREATE OR REPLACE FUNCTION dlm_client_for(
    p_key text, p_bind boolean,
    OUT client_id text, OUT separator text, OUT hierarchy boolean)
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_client       text;
  v_row          record;
  v_lock_timeout text;
BEGIN
  v_client := dlm_scope_client(dlm_key_scope(p_key));
  SELECT * INTO v_row FROM dlm_clients c WHERE c.client_id = v_client;
  IF NOT FOUND THEN
    IF NOT p_bind THEN
      RETURN;
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

-- Both pinned to this schema as every dlm function is (V9's rule): pg_catalog
-- first, pg_temp last.
DO $$
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  EXECUTE format('ALTER FUNCTION dlm_find_cycle(text, text[], text, text, boolean, timestamptz, text, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
  EXECUTE format('ALTER FUNCTION dlm_client_for(text, boolean) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (10, 'first use waited for, no deadlock through a cycle of one', 4)
  ON CONFLICT (version) DO NOTHING;

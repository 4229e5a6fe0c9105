-- dlm migration V18: the waiter's own deadline, recorded and listed.
-- Applied in one transaction after V17, in the same schema; records
-- version 18. Re-runnable.
--
-- A request row's expires_at is its lease (at most 10 s, renewed by the
-- waiter every 5 s; V7), not when its waiter gives up: a waiter for 10
-- minutes showed a deadline 10 s away, renewed every 5 s. So:
--   * dlm_lock_requests.wait_until records the waiter's own deadline: when
--     its acquireLock gives up (NULL: it has none, or an older library made
--     the request). For the listings only: no rule reads it; a request
--     still counts until expires_at alone.
--   * dlm_register_wait gains an 8th argument, p_wait_ms: the time from now
--     to that deadline, whole (p_max_wait_ms stays the lease, capped at
--     10 s); NULL for a waiter without a deadline. The 7-argument form
--     (and the 6-argument one of schema 4, which calls it) runs as the
--     8-argument one with NULL.
--   * dlm_list_requests and dlm_list_waiters return it, last, as
--     wait_until_ms (NULL when not recorded).
--
-- Rolling upgrade: the old signatures stay and mean what they meant; the
-- listings return one column more, after those an older library names
-- (as V17 did). compatible_from = 4.

-- ------------------------------------------------------------- tables

ALTER TABLE dlm_lock_requests ADD COLUMN IF NOT EXISTS wait_until timestamptz;

COMMENT ON COLUMN dlm_lock_requests.wait_until IS
  'The waiter''s own deadline (when its acquireLock gives up), as it registered it (V18); NULL when it has none or an older library made the request. Listed only: the request counts until expires_at, its lease.';

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- The listings return one column more: dropped and created again (their
-- grants follow below).
DROP FUNCTION IF EXISTS dlm_list_requests(text);
DROP FUNCTION IF EXISTS dlm_list_waiters(text);


-- dlm_register_wait (8 arguments): records (or renews) p_owner's request
-- for p_key in either mode, then walks the wait-for graph from it. The
-- row's lease ends min(p_max_wait_ms, 10 s) from now: a waiter renews it
-- by registering again, which keeps its place in the queue (requested_at)
-- while the lease has not ended; a lapsed one starts again at the back.
-- p_wait_ms (V18): the time from now to the waiter's own deadline,
-- recorded as wait_until for the listings (NULL: none). Returns '{}', or
-- the cycle that waiting would close (then the row is not kept). No table
-- lock (V7): the row is written first, and the caller walks the graph
-- again with dlm_wait_cycle after this commits. Limits (dlm_check_limits,
-- requests per owner and per login), tenancy and hierarchy (dlm_check_path)
-- checked. Lazy commit.
CREATE OR REPLACE FUNCTION dlm_register_wait(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text, p_owner text, p_max_wait_ms bigint, p_shared boolean, p_wait_ms bigint) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_now   timestamptz;
  v_owner text;
  v_my_at timestamptz;
  v_max   integer;
  v_count integer;
  v_login integer;
BEGIN
  IF p_key IS NULL OR p_owner IS NULL OR p_max_wait_ms IS NULL
     OR p_max_wait_ms < 0 OR p_shared IS NULL OR p_wait_ms < 0 THEN
    RAISE EXCEPTION 'dlm_register_wait: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM dlm_check_limits(p_key, coalesce(cardinality(p_ancestors), 0) + 1,
                           NULL);
  PERFORM dlm_check_strings(p_owner, NULL, NULL);
  PERFORM dlm_check_path(p_key, p_ancestors, p_desc_begin, p_desc_end);
  PERFORM set_config('synchronous_commit', 'off', true);
  v_owner := dlm_owner_digest(p_owner);
  v_now := clock_timestamp();
  SELECT r.requested_at INTO v_my_at FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = v_owner
     AND r.expires_at > v_now;
  -- A new request beyond the owner's limit is refused (V8); a renewal is
  -- not a new one. Counted through the owner index, at most the limit.
  IF v_my_at IS NULL THEN
    v_max := coalesce((SELECT m.max_requests_per_owner FROM dlm_limits m
                        WHERE m.id), 100);
    SELECT count(*) INTO v_count FROM (
        SELECT 1 FROM dlm_lock_requests r
         WHERE r.owner_id = v_owner AND r.resource <> p_key
           AND r.expires_at > v_now
         LIMIT v_max) q;
    IF v_count >= v_max THEN
      RAISE EXCEPTION 'dlm: owner has % live requests (limit max_requests_per_owner = %)',
        v_count, v_max
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- And beyond the login's (V17), whatever owners it uses.
    v_login := coalesce((SELECT m.max_requests_per_login FROM dlm_limits m
                          WHERE m.id), 1000);
    SELECT count(*) INTO v_count FROM (
        SELECT 1 FROM dlm_lock_requests r
         WHERE r.login = session_user::text AND r.expires_at > v_now
         LIMIT v_login) q;
    IF v_count >= v_login THEN
      RAISE EXCEPTION 'dlm: login "%" has % live requests (limit max_requests_per_login = %)',
        session_user, v_count, v_login
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END IF;

  INSERT INTO dlm_lock_requests AS r
      (resource, owner_id, requested_at, expires_at, ancestors, desc_begin,
       desc_end, mode, login, wait_until)
    VALUES (p_key, v_owner, coalesce(v_my_at, v_now),
            v_now + least(p_max_wait_ms, 10000) * interval '1 millisecond',
            coalesce(p_ancestors, '{}'), p_desc_begin, p_desc_end,
            CASE WHEN p_shared THEN 'SHARED' ELSE 'EXCLUSIVE' END,
            session_user,
            -- The waiter's own deadline, for the listings only; none past
            -- 100 years (a wait without end, as far as anyone can tell).
            CASE WHEN p_wait_ms <= 3153600000000
                 THEN v_now + p_wait_ms * interval '1 millisecond' END)
    ON CONFLICT (resource, owner_id) DO UPDATE
      SET requested_at = excluded.requested_at,
          expires_at = excluded.expires_at, ancestors = excluded.ancestors,
          desc_begin = excluded.desc_begin, desc_end = excluded.desc_end,
          mode = excluded.mode, login = excluded.login,
          wait_until = excluded.wait_until;

  RETURN dlm_confirmed_cycle(p_key, coalesce(p_ancestors, '{}'),
                             p_desc_begin, p_desc_end, p_shared,
                             coalesce(v_my_at, v_now), v_owner);
END
$$;

COMMENT ON FUNCTION dlm_register_wait(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text, p_owner text, p_max_wait_ms bigint, p_shared boolean, p_wait_ms bigint) IS 'dlm (client): records or renews a waiter''s request (a lease of at most 10 s) and its own deadline (p_wait_ms from now, for the listings) unless waiting would close a cycle (returned).';


-- dlm_register_wait (7 arguments, schemas 5 to 17): the 8-argument form
-- without the waiter's deadline.
CREATE OR REPLACE FUNCTION dlm_register_wait(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text, p_owner text, p_max_wait_ms bigint, p_shared boolean) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  RETURN dlm_register_wait(p_key, p_ancestors, p_desc_begin, p_desc_end,
                           p_owner, p_max_wait_ms, p_shared, NULL::bigint);
END
$$;

COMMENT ON FUNCTION dlm_register_wait(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text, p_owner text, p_max_wait_ms bigint, p_shared boolean) IS 'dlm (client, schema 5 to 17 callers): the 8-argument dlm_register_wait without the waiter''s deadline (recorded as NULL).';


-- dlm_list_requests (client): live requests under a key prefix, with
-- their mode; V17: login, for admins; V18: the last column, wait_until_ms,
-- the waiter's own deadline (NULL when not recorded).
CREATE FUNCTION dlm_list_requests(p_prefix text) RETURNS TABLE(resource text, owner_id text, requested_at_ms bigint, expires_at_ms bigint, shared boolean, login text, wait_until_ms bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all    boolean := dlm_is_admin();
  v_prefix text := coalesce(p_prefix, '');
  v_end    text := dlm_prefix_end(coalesce(p_prefix, ''));
BEGIN
  RETURN QUERY
    SELECT r.resource::text, r.owner_id,
           floor(extract(epoch FROM r.requested_at) * 1000)::bigint,
           floor(extract(epoch FROM r.expires_at) * 1000)::bigint,
           r.mode = 'SHARED', CASE WHEN v_all THEN r.login END,
           floor(extract(epoch FROM r.wait_until) * 1000)::bigint
      FROM dlm_lock_requests r
     WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
       AND (v_end IS NULL OR r.resource < v_end)
       AND starts_with(r.resource, v_prefix)
     ORDER BY r.resource, r.requested_at, r.owner_id;
END
$$;

COMMENT ON FUNCTION dlm_list_requests(p_prefix text) IS 'dlm (client): live request rows under a key prefix, with their mode; login for admins (V17); the waiter''s own deadline, wait_until_ms (V18).';


-- dlm_list_waiters (client): live requests under a key prefix; V17:
-- login, for admins; V18: the last column, wait_until_ms.
CREATE FUNCTION dlm_list_waiters(p_prefix text) RETURNS TABLE(resource text, owner_id text, requested_at_ms bigint, expires_at_ms bigint, login text, wait_until_ms bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all    boolean := dlm_is_admin();
  v_prefix text := coalesce(p_prefix, '');
  v_end    text := dlm_prefix_end(coalesce(p_prefix, ''));
BEGIN
  IF v_end IS NULL THEN
    RETURN QUERY
      SELECT r.resource::text, r.owner_id,
             floor(extract(epoch FROM r.requested_at) * 1000)::bigint,
             floor(extract(epoch FROM r.expires_at) * 1000)::bigint,
             CASE WHEN v_all THEN r.login END,
             floor(extract(epoch FROM r.wait_until) * 1000)::bigint
        FROM dlm_lock_requests r
       WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
         AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  ELSE
    RETURN QUERY
      SELECT r.resource::text, r.owner_id,
             floor(extract(epoch FROM r.requested_at) * 1000)::bigint,
             floor(extract(epoch FROM r.expires_at) * 1000)::bigint,
             CASE WHEN v_all THEN r.login END,
             floor(extract(epoch FROM r.wait_until) * 1000)::bigint
        FROM dlm_lock_requests r
       WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
         AND r.resource < v_end AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_list_waiters(p_prefix text) IS 'dlm (client): live request rows under a key prefix; login for admins (V17); the waiter''s own deadline, wait_until_ms (V18).';


-- Pinned to this schema as every dlm function is (V9's rule): pg_catalog
-- first, pg_temp last.
DO $$
DECLARE
  v_fn text;
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_register_wait(text, text[], text, text, text, bigint, boolean, bigint)',
      'dlm_register_wait(text, text[], text, text, text, bigint, boolean)',
      'dlm_list_requests(text)',
      'dlm_list_waiters(text)']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
END
$$;

-- New and re-created functions are EXECUTE for PUBLIC when created: none
-- for anyone (V9's rule), then for the client role.
DO $$
DECLARE
  v_client  text := (SELECT value FROM dlm_config WHERE name = 'client_role');
  v_admin   text := (SELECT value FROM dlm_config WHERE name = 'admin_role');
  v_grantee text;
  v_fn      text;
BEGIN
  FOREACH v_grantee IN ARRAY ARRAY['PUBLIC', 'dlm_client', v_client, v_admin]
  LOOP
    IF v_grantee <> 'PUBLIC'
       AND NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_grantee) THEN
      CONTINUE;
    END IF;
    IF v_grantee <> 'PUBLIC' THEN
      v_grantee := quote_ident(v_grantee);
    END IF;
    FOREACH v_fn IN ARRAY ARRAY[
        'dlm_register_wait(text, text[], text, text, text, bigint, boolean, bigint)',
        'dlm_list_requests(text)', 'dlm_list_waiters(text)']
    LOOP
      EXECUTE format('REVOKE ALL ON FUNCTION %I.%s FROM %s',
                     current_schema(), v_fn, v_grantee);
    END LOOP;
  END LOOP;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_register_wait(text, text[], text, text, text, bigint, boolean, bigint)',
      'dlm_list_requests(text)', 'dlm_list_waiters(text)']
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %I.%s TO %I',
                   current_schema(), v_fn, v_client);
  END LOOP;
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (18, 'waiter deadlines recorded and listed', 4)
  ON CONFLICT (version) DO NOTHING;

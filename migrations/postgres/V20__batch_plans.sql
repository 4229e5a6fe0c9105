-- dlm migration V20: the batch functions' plans. Applied in one
-- transaction after V19, in the same schema; records version 20.
-- Re-runnable.
--
-- Two costs of V19's batch functions, found by measuring them alone
-- (docs/performance.md, "Schema 20"):
--   * Replanning. A PL/pgSQL statement's plan is cached per connection, and
--     PostgreSQL's plan cache picks a plan made for each call's values
--     (a custom plan, planned afresh every call) when those look cheaper
--     than the generic one, which they do for the arrays of a batch of one
--     or two keys. A one-key batch then cost 2.4x as much as with the
--     generic plan. The batch functions now run with plan_cache_mode =
--     force_generic_plan: their statements are written for the generic plan
--     (each key found through the primary key), whatever the batch's size.
--   * Every key against every key. dlm_release_each and dlm_extend_each
--     joined the batch's keys to the rows they had locked with a nested
--     loop that compared every key with every row: 4,096 comparisons for 64
--     keys, about half of a renewal's cost. They now take the rows through
--     the keys themselves (one primary-key lookup per key, in key order,
--     SKIP LOCKED as before) and check each row's token after its lock.
-- Answers, row locks and their order, durability and every check are as in
-- V19.
-- plan_cache_mode needs PostgreSQL 12 or later (dlm is tested on 15).
--
-- Rolling upgrade: the signatures are V19's; nothing an older library
-- calls changed. compatible_from = 4.

-- dlm_release_each: V19's answers. The rows of the batch's keys, each
-- found by its key, locked in key order (FOR NO KEY UPDATE, the lock the
-- single release's UPDATE takes, so a descendant's acquirer, FOR KEY SHARE,
-- does not push a key out of the batch), those locked elsewhere skipped;
-- MATERIALIZED, so the UPDATE finds each locked row again by its ctid
-- alone, with the token and status read under the lock (this call's to
-- change, so they stay current).
CREATE OR REPLACE FUNCTION dlm_release_each(p_keys text[], p_tokens text[], p_desc_end text[])
  RETURNS TABLE(ord integer, outcome text)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_n      integer := cardinality(p_keys);
  v_freed  bigint[];
  v_wake     text[];
  v_lockable text[];
  v_void     text;
BEGIN
  IF v_n IS NULL OR v_n = 0 OR v_n > 64
     OR cardinality(p_tokens) IS DISTINCT FROM v_n
     OR cardinality(p_desc_end) IS DISTINCT FROM v_n THEN
    PERFORM dlm_check_batch(v_n, ARRAY[cardinality(p_tokens),
                                       cardinality(p_desc_end)]);
  END IF;
  v_void := set_config('synchronous_commit', 'off', true);
  WITH mine AS MATERIALIZED (
    SELECT k.ctid AS row_id, k.token, k.status, u.k, u.t, u.de, u.i
      FROM unnest(p_keys, p_tokens, p_desc_end) WITH ORDINALITY AS u (k, t, de, i)
      JOIN dlm_locks k ON k.resource = u.k
     ORDER BY k.resource
       FOR NO KEY UPDATE OF k SKIP LOCKED),
  freed AS (
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
      FROM mine m
     WHERE l.ctid = m.row_id AND m.token = m.t AND m.status = 'HELD'
    RETURNING m.i, l.resource,
              EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource >= m.k
                         AND r.resource < coalesce(m.de, m.k || chr(1))
                         AND r.expires_at > clock_timestamp()) AS wake)
  SELECT array_agg(f.i), array_agg(f.resource) FILTER (WHERE f.wake)
    INTO v_freed, v_wake
    FROM freed f;
  IF v_wake IS NOT NULL THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(w.k))
       FROM unnest(v_wake) AS w (k);
  END IF;
  IF coalesce(cardinality(v_freed), 0) = v_n THEN
    RETURN QUERY SELECT f.i::integer, 'released'::text
                   FROM unnest(v_freed) AS f (i) ORDER BY f.i;
    RETURN;
  END IF;
  -- Not all freed: the others' rows, where they can be locked now, say why
  -- (a row freed meanwhile by its own token's earlier call: released; one
  -- this token still holds, unlocked only now: the single call).
  SELECT array_agg(q.resource) INTO v_lockable
    FROM (SELECT k.resource FROM dlm_locks k
           WHERE k.resource = ANY (p_keys)
           ORDER BY k.resource
             FOR NO KEY UPDATE OF k SKIP LOCKED) AS q;
  RETURN QUERY
    SELECT u.i::integer,
           CASE WHEN u.i = ANY (coalesce(v_freed, '{}')) THEN 'released'
                WHEN NOT u.k = ANY (coalesce(v_lockable, '{}')) THEN 'single'
                WHEN l.token = u.t AND l.status = 'HELD' THEN 'single'
                WHEN l.token = u.t THEN 'released'
                ELSE 'lost' END
      FROM unnest(p_keys, p_tokens) WITH ORDINALITY AS u (k, t, i)
      LEFT JOIN dlm_locks l ON l.resource = u.k
     ORDER BY u.i;
END
$$;

COMMENT ON FUNCTION dlm_release_each(p_keys text[], p_tokens text[], p_desc_end text[]) IS
  'dlm (client): token-conditional EXCLUSIVE releases of keys of depth one, set-based, lazily committed; each answered released, lost or single.';


-- dlm_extend_each: V19's answers, the rows taken as dlm_release_each's
-- above. dlm_extend's conditions per key after the lock: this token's HELD
-- row, the TTL within the cap, the login still a member of the role its
-- client is bound to (the key's scope computed once per key, in the
-- materialized rows, so dlm_scope_client is inlined on a column).
CREATE OR REPLACE FUNCTION dlm_extend_each(p_keys text[], p_tokens text[], p_ttl_ms bigint[])
  RETURNS TABLE(ord integer, outcome text, expires_at_ms bigint)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_n       integer := cardinality(p_keys);
  v_done    bigint[];
  v_until   bigint[];
  v_locked  text[];
  v_void    text;
BEGIN
  IF v_n IS NULL OR v_n = 0 OR v_n > 64
     OR cardinality(p_tokens) IS DISTINCT FROM v_n
     OR cardinality(p_ttl_ms) IS DISTINCT FROM v_n THEN
    PERFORM dlm_check_batch(v_n, ARRAY[cardinality(p_tokens),
                                       cardinality(p_ttl_ms)]);
  END IF;
  IF current_setting('synchronous_commit') = 'off' THEN
    v_void := set_config('synchronous_commit', 'on', true);
  END IF;
  WITH mine AS MATERIALIZED (
    SELECT k.ctid AS row_id, k.token, k.status, u.t, u.ttl, u.i,
           dlm_key_scope(u.k) AS scope
      FROM unnest(p_keys, p_tokens, p_ttl_ms) WITH ORDINALITY AS u (k, t, ttl, i)
      JOIN dlm_locks k ON k.resource = u.k
     ORDER BY k.resource
       FOR NO KEY UPDATE OF k SKIP LOCKED),
  extended AS (
    UPDATE dlm_locks l
       SET expires_at = clock_timestamp() + m.ttl * interval '1 millisecond',
           ttl_ms = m.ttl
      FROM mine m
     WHERE l.ctid = m.row_id AND m.token = m.t AND m.status = 'HELD'
       AND m.ttl > 0
       AND m.ttl <= coalesce((SELECT x.max_ttl_ms FROM dlm_limits x
                               WHERE x.id), 31536000000)
       AND NOT EXISTS (SELECT 1 FROM dlm_clients c
                        WHERE c.client_id = dlm_scope_client(m.scope)
                          AND NOT pg_has_role(session_user, c.role_oid, 'MEMBER'))
    RETURNING m.i, floor(extract(epoch FROM l.expires_at) * 1000)::bigint AS until_ms)
  SELECT array_agg(e.i), array_agg(e.until_ms) INTO v_done, v_until
    FROM extended e;
  IF coalesce(cardinality(v_done), 0) = v_n THEN
    RETURN QUERY SELECT d.i::integer, 'extended'::text, d.until_ms
                   FROM unnest(v_done, v_until) AS d (i, until_ms) ORDER BY d.i;
    RETURN;
  END IF;
  -- The others: locked now, and not this token's HELD row: lost; this
  -- token's (a check refused it) or not lockable: the single call.
  SELECT array_agg(q.resource) INTO v_locked
    FROM (SELECT k.resource FROM dlm_locks k
           WHERE k.resource = ANY (p_keys)
           ORDER BY k.resource
             FOR NO KEY UPDATE OF k SKIP LOCKED) AS q;
  RETURN QUERY
    SELECT u.i::integer,
           CASE WHEN d.n IS NOT NULL THEN 'extended'
                WHEN NOT u.k = ANY (coalesce(v_locked, '{}')) THEN 'single'
                WHEN l.status = 'HELD' AND l.token = u.t THEN 'single'
                ELSE 'lost' END,
           v_until[d.n]
      FROM unnest(p_keys, p_tokens) WITH ORDINALITY AS u (k, t, i)
      LEFT JOIN LATERAL (SELECT array_position(v_done, u.i) AS n) AS d
        ON d.n IS NOT NULL
      LEFT JOIN dlm_locks l ON d.n IS NULL AND l.resource = u.k
     ORDER BY u.i;
END
$$;

COMMENT ON FUNCTION dlm_extend_each(p_keys text[], p_tokens text[], p_ttl_ms bigint[]) IS
  'dlm (client): token-conditional EXCLUSIVE lease extensions, set-based; each answered extended, lost or single.';


-- Pinned to this schema as every dlm function is (V9's rule), and the
-- generic plans (see the header) for the batch functions, including the
-- two CREATE OR REPLACE above reset.
DO $$
DECLARE
  v_fn text;
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_release_each(text[], text[], text[])',
      'dlm_extend_each(text[], text[], bigint[])']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_try_acquire_each(text[], text[], text[], text[], text[], bigint[], text, bigint)',
      'dlm_release_each(text[], text[], text[])',
      'dlm_extend_each(text[], text[], bigint[])']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan',
                   v_fn);
  END LOOP;
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (20, 'batch functions: generic plans, keys joined by key', 4)
  ON CONFLICT (version) DO NOTHING;

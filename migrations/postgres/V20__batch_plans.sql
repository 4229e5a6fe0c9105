-- dlm migration V20: the functions' plans and the per-login indexes.
-- Applied in one transaction after V19, in the same schema; records
-- version 20. Re-runnable.
--
-- Costs found by running the functions alone (docs/performance.md,
-- "Schema 20"):
--   * Replanning. A PL/pgSQL statement's plan is cached per connection, and
--     PostgreSQL's plan cache picks a plan made for each call's values
--     (a custom plan, planned afresh every call) whenever those look cheaper
--     than the generic one: for the arrays of a batch of one or two keys,
--     and for a descendant range with its bounds known. A one-key batch
--     then cost 2.4x as much as with the generic plan. Every PL/pgSQL
--     function of dlm now runs with plan_cache_mode = force_generic_plan:
--     the statements are written for the generic plan (each key found
--     through the primary key). A migration that replaces one of them sets
--     it again (tests/security checks that each has it).
--   * Everyone's holds counted. The per-login counts compare the login
--     column with session_user::text, whose collation is "C" (a name's),
--     and an index in the default collation cannot serve that comparison:
--     each EXCLUSIVE acquire walked every login's HELD rows (and the SHARED
--     and wait counts every login's holds and requests), and a partial
--     index of HELD rows alone also drew other statements' generic plans
--     (a release's UPDATE, an acquire's descendant probe) to scan every
--     HELD row. A login holding 1,984 locks made another login's
--     acquire+release cycle cost 2.7-3.0x. The three indexes are rebuilt in
--     collation "C", and the one on dlm_locks is limited to rows that have
--     a login, which only the counts (which name the login) can use.
--   * Every key against every key. dlm_release_each and dlm_extend_each
--     joined the batch's keys to the rows they had locked with a nested
--     loop that compared every key with every row: 4,096 comparisons for 64
--     keys, about half of a renewal's cost. They now take the rows through
--     the keys themselves (one primary-key lookup per key, in key order,
--     SKIP LOCKED as before) and check each row's token after its lock.
-- Answers, row locks and their order, durability and every check are as in
-- V19. plan_cache_mode needs PostgreSQL 12 or later (dlm is tested on 15).
--
-- Rolling upgrade: the signatures are V19's; nothing an older library
-- calls changed. compatible_from = 4. The indexes are rebuilt here, each
-- table locked (ACCESS EXCLUSIVE) while its index is dropped and built:
-- the build reads the whole table (a second or so per million rows, as
-- V17's did), and the calls on it wait that long.

-- ------------------------------------------------------------- indexes
-- Each serves one count (see the header): a login's live EXCLUSIVE holds,
-- its SHARED holds, its requests. Per table, the old index is dropped
-- before the new one is built, so the table's strongest lock (ACCESS
-- EXCLUSIVE, for the DROP) is its first: building first would hold SHARE
-- and then wait to upgrade it, a deadlock with any caller that read the
-- table and then wants to write it (seen under load in
-- tests/upgrade). The tables in V17's order.
DROP INDEX IF EXISTS dlm_locks_login_held_idx;
CREATE INDEX IF NOT EXISTS dlm_locks_holds_by_login_idx
  ON dlm_locks (holder_login COLLATE "C")
  WHERE status = 'HELD' AND holder_login IS NOT NULL;
DROP INDEX IF EXISTS dlm_shared_holds_login_idx;
CREATE INDEX IF NOT EXISTS dlm_shared_holds_by_login_idx
  ON dlm_shared_holds (holder_login COLLATE "C");
DROP INDEX IF EXISTS dlm_lock_requests_login_idx;
CREATE INDEX IF NOT EXISTS dlm_lock_requests_by_login_idx
  ON dlm_lock_requests (login COLLATE "C");

-- dlm_try_acquire_each: V19's, with the grant's three probes kept one
-- per key (see the comment above them).
CREATE OR REPLACE FUNCTION dlm_try_acquire_each(p_keys text[], p_desc_begin text[], p_desc_end text[], p_owners text[], p_tokens text[], p_ttl_ms bigint[], p_host text, p_pid bigint)
  RETURNS TABLE(ord integer, outcome text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_n       integer := cardinality(p_keys);
  v_locked  bigint[];
  v_granted bigint[];
  v_tokens  bigint[];
  v_at      bigint[];
  v_until   bigint[];
  v_void    text;
BEGIN
  -- The full check (and its error) only when a cheap one fails; a limit
  -- lowered under 64 sends every key to the single call (statement one).
  IF v_n IS NULL OR v_n = 0 OR v_n > 64
     OR cardinality(p_desc_begin) IS DISTINCT FROM v_n
     OR cardinality(p_desc_end) IS DISTINCT FROM v_n
     OR cardinality(p_owners) IS DISTINCT FROM v_n
     OR cardinality(p_tokens) IS DISTINCT FROM v_n
     OR cardinality(p_ttl_ms) IS DISTINCT FROM v_n THEN
    PERFORM dlm_check_batch(v_n, ARRAY[cardinality(p_desc_begin),
      cardinality(p_desc_end), cardinality(p_owners), cardinality(p_tokens),
      cardinality(p_ttl_ms)]);
  END IF;
  -- Durable whatever the default (see V3).
  IF current_setting('synchronous_commit') = 'off' THEN
    v_void := set_config('synchronous_commit', 'on', true);
  END IF;
  -- Tenancy, limits and the row locks, as dlm_try_acquire's first
  -- statement at depth one: the conditions filter the rows before they are
  -- locked, so a key that fails them locks nothing. Rows locked in key
  -- order; rows locked by someone else skipped. The login's holds are
  -- counted once, as if every key of the batch were granted.
  SELECT array_agg(q.i) INTO v_locked
    FROM (SELECT u.i
            FROM unnest(p_keys, p_desc_begin, p_desc_end, p_owners, p_tokens,
                        p_ttl_ms) WITH ORDINALITY AS u (k, db, de, o, t, ttl, i)
            -- The scope once per key, kept a column (OFFSET 0: not
            -- flattened), so dlm_scope_client is inlined on it; on the
            -- expression it would run as a function call per row.
            CROSS JOIN LATERAL (
              SELECT s.scope, dlm_scope_client(s.scope) AS client
                FROM (SELECT dlm_key_scope(u.k) AS scope OFFSET 0) AS s) AS ks
            JOIN dlm_locks l ON l.resource = u.k
            JOIN dlm_clients c ON c.client_id = ks.client
            JOIN dlm_limits m ON m.id
           WHERE v_n <= m.max_keys_per_call
             AND u.ttl > 0 AND u.ttl <= m.max_ttl_ms
             AND octet_length(u.k) <= m.max_key_bytes
             AND octet_length(u.o) <= m.max_owner_bytes
             AND octet_length(u.t) <= m.max_token_bytes
             AND octet_length(coalesce(p_host, '')) <= m.max_host_bytes
             AND c.hierarchy = (u.db IS NOT NULL)
             AND (c.separator IS NULL
                  OR (u.db = u.k || c.separator
                      AND u.de = u.k || chr(ascii(c.separator) + 1)
                      AND position(c.separator IN
                            substr(u.k, length(ks.scope) + 1)) = 0))
             AND pg_has_role(session_user, c.role_oid, 'MEMBER')
             AND (SELECT count(*) FROM (
                    SELECT 1 FROM dlm_locks h
                     WHERE h.holder_login = session_user::text AND h.status = 'HELD'
                       AND h.expires_at > clock_timestamp()
                     LIMIT (SELECT n.max_holds_per_login FROM dlm_limits n
                             WHERE n.id)) AS z) + v_n <= m.max_holds_per_login
           ORDER BY l.resource
             FOR UPDATE OF l SKIP LOCKED) AS q;

  -- The grant, in a statement of its own (a fresh snapshot: it sees what
  -- committed while the row locks were taken): every locked key whose row
  -- is free, expired or not this token's, with nothing on its descendants,
  -- no SHARED hold on it or under it and no live request of another owner
  -- (dlm_try_acquire's fast path). A waiter's own request ends with it.
  -- Each probe is a subplan of its key (OFFSET 0: not made a join), an
  -- index range scan of that key's descendants: as an anti-join, a generic
  -- plan could hash every HELD row (V20).
  IF v_locked IS NOT NULL THEN
    WITH granted AS (
      UPDATE dlm_locks l
         SET status = 'HELD', owner_id = dlm_owner_digest(u.o), token = u.t,
             fencing_token = greatest(l.fencing_token,
                                      (SELECT f.floor_token FROM dlm_fencing_floor f
                                        WHERE f.id)) + 1,
             (acquired_at, expires_at) =
               (SELECT g.at, g.at + u.ttl * interval '1 millisecond'
                  FROM (SELECT clock_timestamp() AS at) AS g),
             ttl_ms = u.ttl,
             holder_host = p_host, holder_pid = p_pid,
             holder_ip = inet_client_addr(), holder_login = session_user
        FROM unnest(p_keys, p_desc_begin, p_desc_end, p_owners, p_tokens,
                    p_ttl_ms) WITH ORDINALITY AS u (k, db, de, o, t, ttl, i)
       WHERE u.i = ANY (v_locked) AND l.resource = u.k
         AND (l.status IS DISTINCT FROM 'HELD'
              OR (l.token IS DISTINCT FROM u.t
                  AND l.expires_at <= clock_timestamp()))
         AND NOT EXISTS (
               SELECT 1 FROM dlm_locks a
                WHERE a.resource >= u.db AND a.resource < u.de
                  AND a.status = 'HELD' OFFSET 0)
         AND NOT EXISTS (
               SELECT 1 FROM dlm_shared_holds s
                WHERE s.resource >= u.k
                  AND s.resource < coalesce(u.de, u.k || chr(1)) OFFSET 0)
         AND NOT EXISTS (
               SELECT 1 FROM dlm_lock_requests r
                WHERE r.resource >= u.k
                  AND r.resource < coalesce(u.de, u.k || chr(1))
                  AND r.owner_id <> dlm_owner_digest(u.o)
                  AND r.expires_at > clock_timestamp() OFFSET 0)
      RETURNING u.i, l.resource, l.owner_id, l.fencing_token,
                floor(extract(epoch FROM l.acquired_at) * 1000)::bigint AS at_ms,
                floor(extract(epoch FROM l.expires_at) * 1000)::bigint AS until_ms,
                EXISTS (SELECT 1 FROM dlm_lock_requests m
                         WHERE m.resource = u.k AND m.owner_id = l.owner_id)
                  AS requested),
    ended AS (
      DELETE FROM dlm_lock_requests r USING granted g
       WHERE g.requested AND r.resource = g.resource AND r.owner_id = g.owner_id)
    SELECT array_agg(g.i), array_agg(g.fencing_token), array_agg(g.at_ms),
           array_agg(g.until_ms)
      INTO v_granted, v_tokens, v_at, v_until
      FROM granted g;
  END IF;
  -- Nothing granted: nothing a crash could lose changed (lazy commit).
  IF v_granted IS NULL THEN
    v_void := set_config('synchronous_commit', 'off', true);
  END IF;

  -- Each key's answer. A locked key not granted: this token's already (a
  -- retry after a lost reply: answered as the first time), or held live
  -- by another ('held'); anything else goes to the single call.
  RETURN QUERY
    SELECT u.i::integer,
           CASE WHEN gi.n IS NOT NULL THEN 'acquired'
                WHEN l.status = 'HELD' AND l.token = u.t THEN 'acquired'
                WHEN l.status = 'HELD' AND l.expires_at > clock_timestamp()
                  THEN 'held'
                ELSE 'single' END,
           CASE WHEN gi.n IS NOT NULL THEN v_tokens[gi.n]
                WHEN l.status = 'HELD' AND l.token = u.t THEN l.fencing_token END,
           CASE WHEN gi.n IS NOT NULL THEN v_at[gi.n]
                WHEN l.status = 'HELD' AND l.token = u.t
                  THEN floor(extract(epoch FROM l.acquired_at) * 1000)::bigint END,
           CASE WHEN gi.n IS NOT NULL THEN v_until[gi.n]
                WHEN l.status = 'HELD' AND l.token = u.t
                  THEN floor(extract(epoch FROM l.expires_at) * 1000)::bigint END
      FROM unnest(p_keys, p_tokens) WITH ORDINALITY AS u (k, t, i)
      LEFT JOIN LATERAL (SELECT array_position(v_granted, u.i) AS n) AS gi
        ON gi.n IS NOT NULL
      LEFT JOIN dlm_locks l
        ON gi.n IS NULL AND u.i = ANY (v_locked) AND l.resource = u.k
     ORDER BY u.i;
END
$$;

COMMENT ON FUNCTION dlm_try_acquire_each(p_keys text[], p_desc_begin text[], p_desc_end text[], p_owners text[], p_tokens text[], p_ttl_ms bigint[], p_host text, p_pid bigint) IS
  'dlm (client): EXCLUSIVE attempts on keys of depth one, set-based, each answered acquired, held or single (to be sent to dlm_try_acquire alone); rows locked elsewhere skipped.';


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


-- Pinned to this schema as every dlm function is (V9's rule); then the
-- generic plans (see the header) for every PL/pgSQL function of dlm in
-- this schema (the SQL-language helpers are inlined, no plans of their
-- own).
DO $$
DECLARE
  v_fn regprocedure;
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_try_acquire_each(text[], text[], text[], text[], text[], bigint[], text, bigint)',
      'dlm_release_each(text[], text[], text[])',
      'dlm_extend_each(text[], text[], bigint[])']::regprocedure[]
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
  FOR v_fn IN
    SELECT p.oid::regprocedure FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proname LIKE 'dlm\_%'
       AND p.prolang = (SELECT l.oid FROM pg_language l
                         WHERE l.lanname = 'plpgsql')
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan',
                   v_fn);
  END LOOP;
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (20, 'generic plans; per-login indexes in collation C', 4)
  ON CONFLICT (version) DO NOTHING;

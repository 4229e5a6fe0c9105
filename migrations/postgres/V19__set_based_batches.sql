-- dlm migration V19: set-based batches, several locks' work per call.
-- Applied in one transaction after V18, in the same schema; records
-- version 19. Re-runnable.
--
-- A call's server cost is mostly the set-up of its statements, paid per
-- statement, not per row (V11's cost note). A manager whose threads call at
-- once now sends their calls together, and these functions do the work of
-- all of them in a few statements over arrays:
--   * dlm_try_acquire_each: EXCLUSIVE attempts on keys of depth one (no
--     ancestors). One statement checks tenancy and the limits and locks the
--     keys' rows in key order, skipping rows someone else has locked (SKIP
--     LOCKED); a second, with a fresh snapshot, grants every locked key
--     that nothing blocks, as dlm_try_acquire's fast path does. Each key
--     is answered on its own: 'acquired' (with its fencing token and
--     times), 'held' (a live EXCLUSIVE holder of another token: refused,
--     blocked by the key itself), or 'single': anything else (a row locked
--     elsewhere or missing, a check that did not pass, something on its
--     descendants, a waiter's request), which the library then sends alone
--     to dlm_try_acquire, whose answer (or error) is that key's. So no
--     rule of a single call is given up, and no key waits for another's
--     row lock.
--   * dlm_release_each, dlm_extend_each: EXCLUSIVE releases of keys of
--     depth one and EXCLUSIVE extensions, one statement each when every
--     row is free to lock; 'released'/'extended', 'lost' (the token no
--     longer holds it), or 'single' as above.
--   * dlm_try_acquire_all: several keys, any depth and mode, all or none,
--     in one call, inside one subtransaction undone whole when one key is
--     refused: EXCLUSIVE keys without ancestors set-based as above first;
--     whatever that leaves, each key through dlm_try_acquire in key order.
-- Durable acquire, lazy release, as the single calls (V6). A batch is at
-- most max_keys_per_call keys (22023 beyond).
--
-- Rolling upgrade: nothing changes for an older library; the new functions
-- are used only by a library that knows them. compatible_from = 4.

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_check_batch (internal): refuses (22023) a batch whose arrays differ
-- in length, or longer than max_keys_per_call.
CREATE OR REPLACE FUNCTION dlm_check_batch(p_n integer, p_lengths integer[]) RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_max integer := coalesce((SELECT m.max_keys_per_call FROM dlm_limits m
                              WHERE m.id), 64);
BEGIN
  IF p_n IS NULL OR p_n = 0
     OR EXISTS (SELECT 1 FROM unnest(p_lengths) AS u (n)
                 WHERE u.n IS DISTINCT FROM p_n) THEN
    RAISE EXCEPTION 'dlm: a batch''s arrays must be non-empty and of one length'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_n > v_max THEN
    RAISE EXCEPTION 'dlm: a batch of % keys (limit max_keys_per_call = %)', p_n, v_max
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Send fewer keys per call; an admin can raise the limit (UPDATE dlm_limits SET max_keys_per_call = ...).';
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_check_batch(p_n integer, p_lengths integer[]) IS
  'dlm (internal): refuses a batch of arrays of different lengths or of more than max_keys_per_call keys (22023).';


-- dlm_try_acquire_each: see the header. p_desc_begin/p_desc_end: each
-- key's descendant range (NULL without hierarchy), as dlm_try_acquire
-- takes them. Rows in ord order of the arguments (1-based).
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
                  AND a.status = 'HELD')
         AND NOT EXISTS (
               SELECT 1 FROM dlm_shared_holds s
                WHERE s.resource >= u.k
                  AND s.resource < coalesce(u.de, u.k || chr(1)))
         AND NOT EXISTS (
               SELECT 1 FROM dlm_lock_requests r
                WHERE r.resource >= u.k
                  AND r.resource < coalesce(u.de, u.k || chr(1))
                  AND r.owner_id <> dlm_owner_digest(u.o)
                  AND r.expires_at > clock_timestamp())
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


-- dlm_release_each: see the header. Each key's answer: 'released' (freed,
-- or already freed by this token), 'lost' (another acquisition took it
-- over), 'single' (its row was locked elsewhere or is missing: sent to
-- dlm_release alone). Wakes the waiters of each freed key as dlm_release.
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
  -- Rows locked in key order, those locked elsewhere skipped; FOR NO KEY
  -- UPDATE, the lock the single release's UPDATE takes, so a descendant's
  -- acquirer (FOR KEY SHARE) does not push a key out of the batch.
  -- The locked rows once (MATERIALIZED: as a subquery of the join it was
  -- scanned again for every key), with what the UPDATE checks: they are
  -- this call's to change, so those values stay current, and the UPDATE
  -- finds each row by its ctid alone (a condition on l.status let a
  -- generic plan scan every HELD row through the partial index instead).
  WITH mine AS MATERIALIZED (
    SELECT k.ctid AS row_id, k.resource, k.token, k.status FROM dlm_locks k
     WHERE k.resource = ANY (p_keys)
     ORDER BY k.resource
       FOR NO KEY UPDATE OF k SKIP LOCKED),
  freed AS (
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
      FROM unnest(p_keys, p_tokens, p_desc_end) WITH ORDINALITY AS u (k, t, de, i),
           mine
     WHERE l.ctid = mine.row_id AND mine.resource = u.k
       AND mine.token = u.t AND mine.status = 'HELD'
    RETURNING u.i, l.resource,
              EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource >= u.k
                         AND r.resource < coalesce(u.de, u.k || chr(1))
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


-- dlm_extend_each: see the header. Each key's answer: 'extended' with the
-- new expiry, 'lost' (the token no longer holds the key), 'single' (its
-- row locked elsewhere, or a check that did not pass: sent to dlm_extend
-- alone, which answers or raises as it does). Durable.
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
  -- dlm_extend's conditions per key (the TTL within the cap, the login
  -- still a member of the role its client is bound to).
  -- The locked rows once, found again by ctid (see dlm_release_each).
  WITH mine AS MATERIALIZED (
    SELECT k.ctid AS row_id, k.resource, k.token, k.status FROM dlm_locks k
     WHERE k.resource = ANY (p_keys)
     ORDER BY k.resource
       FOR NO KEY UPDATE OF k SKIP LOCKED),
  extended AS (
    UPDATE dlm_locks l
       SET expires_at = clock_timestamp() + u.ttl * interval '1 millisecond',
           ttl_ms = u.ttl
      FROM unnest(p_keys, p_tokens, p_ttl_ms) WITH ORDINALITY AS u (k, t, ttl, i)
           CROSS JOIN LATERAL (
             SELECT dlm_scope_client(s.scope) AS client
               FROM (SELECT dlm_key_scope(u.k) AS scope OFFSET 0) AS s) AS ks,
           mine
     WHERE l.ctid = mine.row_id AND mine.resource = u.k
       AND mine.token = u.t AND mine.status = 'HELD'
       AND u.ttl > 0
       AND u.ttl <= coalesce((SELECT m.max_ttl_ms FROM dlm_limits m
                               WHERE m.id), 31536000000)
       AND NOT EXISTS (SELECT 1 FROM dlm_clients c
                        WHERE c.client_id = ks.client
                          AND NOT pg_has_role(session_user, c.role_oid, 'MEMBER'))
    RETURNING u.i, floor(extract(epoch FROM l.expires_at) * 1000)::bigint AS until_ms)
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


-- dlm_try_acquire_all: every key or none. p_paths[i] and p_crcs[i] are the
-- text[] and bigint[] literals dlm_try_acquire takes as p_keys and p_crcs
-- (ancestors root first, the key last); the keys are taken in the order
-- given, which the library makes key order. Returns one row per key when
-- all were taken; one row with acquired false and the first refusal's
-- blocked_by and queued when not, having undone what it took. An error of
-- any key is raised, undoing all.
CREATE OR REPLACE FUNCTION dlm_try_acquire_all(p_paths text[], p_crcs text[], p_desc_begin text[], p_desc_end text[], p_owners text[], p_tokens text[], p_ttl_ms bigint[], p_shared boolean[], p_host text, p_pid bigint)
  RETURNS TABLE(ord integer, acquired boolean, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, blocked_by text, queued boolean)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_n       integer := cardinality(p_paths);
  v_i       integer;
  v_r       record;
  v_tokens  bigint[] := '{}';
  v_at      bigint[] := '{}';
  v_until   bigint[] := '{}';
  v_blocked text;
  v_queued  boolean;
  v_key     text;
  v_path    text[];
  v_outcomes text[];
BEGIN
  PERFORM dlm_check_batch(v_n, ARRAY[cardinality(p_crcs),
    cardinality(p_desc_begin), cardinality(p_desc_end), cardinality(p_owners),
    cardinality(p_tokens), cardinality(p_ttl_ms), cardinality(p_shared)]);
  BEGIN
    -- EXCLUSIVE keys without ancestors (the usual set): set-based first,
    -- as dlm_try_acquire_each. All granted: done. One held by a live
    -- holder: refused. Else the loop below takes every key, those granted
    -- here answered as this token's retries.
    IF NOT (true = ANY (p_shared))
       AND NOT EXISTS (SELECT 1 FROM unnest(p_paths) AS p (path)
                        WHERE cardinality(p.path::text[]) <> 1) THEN
      SELECT array_agg(e.outcome ORDER BY e.ord),
             array_agg(e.fencing_token ORDER BY e.ord),
             array_agg(e.acquired_at_ms ORDER BY e.ord),
             array_agg(e.expires_at_ms ORDER BY e.ord)
        INTO v_outcomes, v_tokens, v_at, v_until
        FROM dlm_try_acquire_each(
               ARRAY(SELECT (p.path::text[])[1]
                       FROM unnest(p_paths) WITH ORDINALITY AS p (path, i)
                      ORDER BY p.i),
               p_desc_begin, p_desc_end, p_owners, p_tokens, p_ttl_ms,
               p_host, p_pid) AS e;
      IF 'acquired' = ALL (v_outcomes) THEN
        RETURN QUERY
          SELECT g.i::integer, true, v_tokens[g.i], v_at[g.i], v_until[g.i],
                 NULL::text, false
            FROM generate_series(1, v_n) AS g (i);
        RETURN;
      END IF;
      v_i := array_position(v_outcomes, 'held');
      IF v_i IS NOT NULL THEN
        v_blocked := (p_paths[v_i]::text[])[1];
        v_queued := false;
        RAISE EXCEPTION USING ERRCODE = 'DL002';
      END IF;
      v_tokens := '{}';
      v_at := '{}';
      v_until := '{}';
    END IF;
    FOR v_i IN 1 .. v_n LOOP
      v_path := p_paths[v_i]::text[];
      v_key := v_path[cardinality(v_path)];
      SELECT * INTO v_r
        FROM dlm_try_acquire(p_paths[v_i]::text[], p_crcs[v_i]::bigint[],
                             p_desc_begin[v_i], p_desc_end[v_i], p_owners[v_i],
                             p_tokens[v_i], p_ttl_ms[v_i], p_host, p_pid,
                             p_shared[v_i]);
      IF NOT v_r.acquired THEN
        v_blocked := v_r.blocked_by;
        v_queued := v_r.queued;
        -- Undoes this block's grants (the subtransaction), keeps the answer.
        RAISE EXCEPTION USING ERRCODE = 'DL002';
      END IF;
      v_tokens := v_tokens || v_r.fencing_token;
      v_at := v_at || v_r.acquired_at_ms;
      v_until := v_until || v_r.expires_at_ms;
    END LOOP;
  EXCEPTION
    WHEN SQLSTATE 'DL002' THEN
      PERFORM set_config('synchronous_commit', 'off', true);
      RETURN QUERY SELECT 0, false, NULL::bigint, NULL::bigint, NULL::bigint,
                          v_blocked, v_queued;
      RETURN;
    -- Someone else's open transaction holds a row a key needs past
    -- lock_timeout: that key is busy, as dlm_try_acquire's caller hears it.
    WHEN lock_not_available THEN
      PERFORM set_config('synchronous_commit', 'off', true);
      RETURN QUERY SELECT 0, false, NULL::bigint, NULL::bigint, NULL::bigint,
                          v_key, false;
      RETURN;
  END;
  RETURN QUERY
    SELECT g.i::integer, true, v_tokens[g.i], v_at[g.i], v_until[g.i],
           NULL::text, false
      FROM generate_series(1, v_n) AS g (i);
END
$$;

COMMENT ON FUNCTION dlm_try_acquire_all(p_paths text[], p_crcs text[], p_desc_begin text[], p_desc_end text[], p_owners text[], p_tokens text[], p_ttl_ms bigint[], p_shared boolean[], p_host text, p_pid bigint) IS
  'dlm (client): several keys in either mode, all or none, in one transaction, each through dlm_try_acquire in the order given.';


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
      'dlm_check_batch(integer, integer[])',
      'dlm_try_acquire_each(text[], text[], text[], text[], text[], bigint[], text, bigint)',
      'dlm_release_each(text[], text[], text[])',
      'dlm_extend_each(text[], text[], bigint[])',
      'dlm_try_acquire_all(text[], text[], text[], text[], text[], text[], bigint[], boolean[], text, bigint)']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
END
$$;

-- New functions are EXECUTE for PUBLIC when created: none for anyone (V9's
-- rule), then the client calls for the client role.
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
        'dlm_check_batch(integer, integer[])',
        'dlm_try_acquire_each(text[], text[], text[], text[], text[], bigint[], text, bigint)',
        'dlm_release_each(text[], text[], text[])',
        'dlm_extend_each(text[], text[], bigint[])',
        'dlm_try_acquire_all(text[], text[], text[], text[], text[], text[], bigint[], boolean[], text, bigint)']
    LOOP
      EXECUTE format('REVOKE ALL ON FUNCTION %I.%s FROM %s',
                     current_schema(), v_fn, v_grantee);
    END LOOP;
  END LOOP;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_try_acquire_each(text[], text[], text[], text[], text[], bigint[], text, bigint)',
      'dlm_release_each(text[], text[], text[])',
      'dlm_extend_each(text[], text[], bigint[])',
      'dlm_try_acquire_all(text[], text[], text[], text[], text[], text[], bigint[], boolean[], text, bigint)']
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %I.%s TO %I',
                   current_schema(), v_fn, v_client);
  END LOOP;
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (19, 'set-based batches and several locks at once', 4)
  ON CONFLICT (version) DO NOTHING;

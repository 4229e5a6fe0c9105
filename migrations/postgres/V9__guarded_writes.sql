-- dlm migration V9: writes guarded by the lock (issue 24). Applied in one
-- transaction after V8, in the same schema; records version 9. Re-runnable.
--
-- - dlm_guard_within(key, token, shared): called inside the application's
--   own transaction, checks that the token holds the key (EXCLUSIVE, or
--   its SHARED hold) with a lease that has not expired, and row-locks the
--   hold's row until that transaction ends: the key's row FOR SHARE for an
--   EXCLUSIVE hold, the hold's own row FOR KEY SHARE for a SHARED one.
--   DLM01 when the hold is gone or its lease has ended (LOCK_NOT_HELD; the
--   transaction cannot commit). Other guards of the hold and SHARED
--   co-holders' guards pass it; every takeover waits for it (lock_timeout:
--   the library's rowLockWait, then LOCK_UNAVAILABLE). An EXCLUSIVE
--   holder's own extend and release wait for it too; a SHARED holder's
--   extend does not.
-- - Ancestors are row-locked FOR KEY SHARE instead of FOR SHARE: an
--   ancestor's acquirer (FOR UPDATE) still waits for them, and a takeover
--   of an ancestor's expired hold (FOR NO KEY UPDATE) does not, so two
--   acquirers of children of one expired parent never deadlock.
-- - Takeovers of other keys' holds. An acquire used to pass over an
--   expired hold of an ancestor or a descendant and leave it on its row:
--   its holder could still extend it afterwards (two live holds in
--   conflict) and a guard on it would not have been waited for. Now an
--   acquire that passes over such holds row-locks them (FOR NO KEY UPDATE;
--   a SHARED hold's row FOR UPDATE), checks again in a fresh statement
--   (one extended meanwhile is live and refuses), and takes them over: an
--   EXCLUSIVE hold's row becomes FREE without its token, a SHARED hold is
--   deleted. The fast path leaves any call with a hold of another key in
--   the way, expired or not, to the general path.
-- - dlm_extend_shared takes FOR KEY SHARE on the key's row before it
--   extends: an EXCLUSIVE acquire of the key (FOR UPDATE on that row) that
--   found the SHARED hold expired could otherwise delete it right after
--   the extension made it live again.
--
-- Rolling upgrade: one new function; no signature changes. Libraries for
-- schemas 4 to 8 get the same answers, but that an expired hold of an
-- ancestor or a descendant that was passed over can no longer be extended
-- or released by its holder afterwards (release answers false), as a hold
-- taken over on its own key never could. compatible_from = 4.

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_take_over_expired (internal): for an attempt that found nothing live
-- in its way, the expired holds of its ancestors (p_ancestors) and of its
-- descendants (p_desc_begin <= key < p_desc_end) that conflict with it
-- (EXCLUSIVE ones; SHARED ones too unless p_shared) are row-locked, in key
-- order: an EXCLUSIVE hold's row FOR NO KEY UPDATE (which the other
-- acquirers' FOR KEY SHARE on an ancestor lets through, and a guard's FOR
-- SHARE does not), a SHARED hold's row FOR UPDATE; so a guarded transaction
-- of their holder is waited for (the caller's lock_timeout), and so is an
-- extend in progress. Then, in fresh statements, the first one
-- that is live again (extended meanwhile) is returned and nothing changes;
-- otherwise they are taken over and NULL is returned. Runs as its caller
-- (the schema owner).
CREATE OR REPLACE FUNCTION dlm_take_over_expired(p_ancestors text[],
    p_desc_begin text, p_desc_end text, p_shared boolean) RETURNS text
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_rows    integer;
  v_found   integer := 0;
  v_blocker text;
BEGIN
  -- One index probe per key condition (see dlm_try_acquire).
  PERFORM 1 FROM dlm_locks l
    WHERE l.resource = ANY (p_ancestors) AND l.status = 'HELD'
    ORDER BY l.resource FOR NO KEY UPDATE OF l;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  v_found := v_found + v_rows;
  PERFORM 1 FROM dlm_locks l
    WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
      AND l.status = 'HELD'
    ORDER BY l.resource FOR NO KEY UPDATE OF l;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  v_found := v_found + v_rows;
  IF NOT p_shared THEN
    PERFORM 1 FROM dlm_shared_holds s
      WHERE s.resource = ANY (p_ancestors)
      ORDER BY s.resource, s.token FOR UPDATE OF s;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found + v_rows;
    PERFORM 1 FROM dlm_shared_holds s
      WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
      ORDER BY s.resource, s.token FOR UPDATE OF s;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found + v_rows;
  END IF;
  IF v_found = 0 THEN
    RETURN NULL;
  END IF;

  -- Live again? (Rows are locked now: nothing changes them until we end.)
  SELECT l.resource INTO v_blocker FROM dlm_locks l
    WHERE l.resource = ANY (p_ancestors)
      AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
    ORDER BY l.resource LIMIT 1;
  IF v_blocker IS NULL THEN
    SELECT l.resource INTO v_blocker FROM dlm_locks l
      WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
        AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
      ORDER BY l.resource LIMIT 1;
  END IF;
  IF v_blocker IS NULL AND NOT p_shared THEN
    SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
      WHERE s.resource = ANY (p_ancestors)
        AND s.expires_at > clock_timestamp()
      ORDER BY s.resource LIMIT 1;
    IF v_blocker IS NULL THEN
      SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
        WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
          AND s.expires_at > clock_timestamp()
        ORDER BY s.resource LIMIT 1;
    END IF;
  END IF;
  IF v_blocker IS NOT NULL THEN
    RETURN v_blocker;
  END IF;

  -- Taken over: FREE without the token (the holder's extend finds nothing,
  -- its release answers false), the lease ended now at the latest.
  UPDATE dlm_locks l
     SET status = 'FREE', token = NULL,
         expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = ANY (p_ancestors) AND l.status = 'HELD';
  UPDATE dlm_locks l
     SET status = 'FREE', token = NULL,
         expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
     AND l.status = 'HELD';
  IF NOT p_shared THEN
    DELETE FROM dlm_shared_holds s WHERE s.resource = ANY (p_ancestors);
    DELETE FROM dlm_shared_holds s
     WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end;
  END IF;
  RETURN NULL;
END
$$;

-- dlm_try_acquire: one attempt to take a lock in either mode (p_shared),
-- the whole protocol in one transaction; the 10-argument dlm_acquire's
-- arguments and answer, as one row of OUT parameters. V8: the limits are
-- checked with the tenancy, SHARED holders per key before a SHARED grant,
-- and the fast path's grant time is read after its snapshot. V9: expired
-- holds of other keys in the way (an ancestor's, a descendant's) are taken
-- over like the key's own (dlm_take_over_expired), so their holders'
-- extends and guards fail, and a guarded transaction of theirs is waited
-- for; the fast path leaves such calls to the general path.
CREATE OR REPLACE FUNCTION dlm_try_acquire(p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text, p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint, p_shared boolean, OUT acquired boolean, OUT fencing_token bigint, OUT acquired_at_ms bigint, OUT expires_at_ms bigint, OUT blocked_by text, OUT queued boolean) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
-- Cost note: PL/pgSQL sets every expression it evaluates up afresh in each
-- transaction, and a call is a transaction of its own; so the path of an
-- uncontended EXCLUSIVE grant evaluates as few expressions as it can (no
-- initialised declarations, assignments instead of PERFORM, the answer
-- computed by the granting statement).
DECLARE
  v_depth     integer;
  v_target    text;
  v_count     integer;
  v_turns     integer;
  v_row       record;
  v_now       timestamptz;
  v_stale     boolean;
  v_requested boolean;
  v_void      text;
  v_owner     text;
  v_client    record;
BEGIN
  IF p_keys IS NULL OR cardinality(p_keys) = 0
     OR cardinality(p_crcs) IS DISTINCT FROM cardinality(p_keys)
     OR p_token IS NULL OR p_ttl_ms IS NULL OR p_ttl_ms <= 0
     OR p_shared IS NULL THEN
    RAISE EXCEPTION 'dlm_acquire: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Durable whatever the default (see V3).
  IF current_setting('synchronous_commit') = 'off' THEN
    v_void := set_config('synchronous_commit', 'on', true);
  END IF;
  v_depth := cardinality(p_keys);
  v_target := p_keys[v_depth];
  -- The caller's tenancy and hierarchy (V7), the limits (V8) and its owner
  -- as recorded, in one statement (each statement and expression of a call
  -- is set up afresh in its transaction): fine when the call is within the
  -- limits, the client is bound to a role of the login and the call's
  -- hierarchy is the recorded one. Otherwise dlm_check_limits refuses, or
  -- dlm_check_path binds the client, records its setting, or refuses.
  SELECT dlm_owner_digest(p_owner) AS owner,
         m.max_shared_holders_per_key AS max_shared,
         coalesce(p_ttl_ms <= m.max_ttl_ms
           AND v_depth <= m.max_keys_per_call
           AND octet_length(v_target) <= m.max_key_bytes
           AND c.hierarchy IS NOT DISTINCT FROM (p_desc_begin IS NOT NULL)
           AND pg_has_role(session_user, c.role_oid, 'MEMBER')
           AND CASE
                 WHEN c.separator IS NULL THEN v_depth = 1
                 WHEN p_desc_begin IS DISTINCT FROM v_target || c.separator
                      OR p_desc_end IS DISTINCT FROM
                         v_target || chr(ascii(c.separator) + 1) THEN false
                 -- A one-segment id (most keys) has no ancestors to compare.
                 WHEN v_depth = 1 THEN
                   position(c.separator IN substr(
                     v_target, length(dlm_key_scope(v_target)) + 1)) = 0
                 ELSE p_keys[1:v_depth - 1] = dlm_path_ancestors(
                        v_target, dlm_key_scope(v_target), c.separator)
               END, false) AS fine
    INTO v_client
    FROM (SELECT 1) AS one
    LEFT JOIN dlm_limits m ON m.id
    LEFT JOIN dlm_clients c
      ON c.client_id = dlm_scope_client(dlm_key_scope(v_target));
  IF NOT v_client.fine THEN
    PERFORM dlm_check_limits(v_target, v_depth, p_ttl_ms);
    PERFORM dlm_check_path(v_target, p_keys[1:v_depth - 1], p_desc_begin,
                           p_desc_end);
  END IF;
  v_owner := v_client.owner;

  -- Intention locks, as in V3 but FOR KEY SHARE (V9): ancestors root first
  -- (created when missing or purged meanwhile), then the target FOR UPDATE
  -- in both modes. An ancestor's acquirer (FOR UPDATE) still waits for
  -- them; a takeover of an expired ancestor's hold (FOR NO KEY UPDATE, see
  -- dlm_take_over_expired) does not, so siblings never deadlock on it.
  IF v_depth > 1 THEN
    v_turns := 0;
    LOOP
      PERFORM 1 FROM dlm_locks l
        WHERE l.resource = ANY (p_keys[1:v_depth - 1])
        ORDER BY l.resource FOR KEY SHARE OF l;
      GET DIAGNOSTICS v_count = ROW_COUNT;
      EXIT WHEN v_count >= v_depth - 1;
      v_turns := v_turns + 1;
      IF v_turns > 16 THEN
        RAISE EXCEPTION 'dlm_acquire: rows of % keep being purged', v_target
          USING ERRCODE = 'serialization_failure';
      END IF;
      INSERT INTO dlm_locks (resource, resource_crc)
        SELECT u.k, u.c
          FROM unnest(p_keys[1:v_depth - 1], p_crcs[1:v_depth - 1]) AS u (k, c)
        ORDER BY u.k
        ON CONFLICT (resource) DO NOTHING;
    END LOOP;
  END IF;
  LOOP
    SELECT l.status, l.token, l.expires_at
      INTO v_row FROM dlm_locks l WHERE l.resource = v_target FOR UPDATE OF l;
    EXIT WHEN FOUND;
    v_turns := coalesce(v_turns, 0) + 1;
    IF v_turns > 16 THEN
      RAISE EXCEPTION 'dlm_acquire: the row of % keeps being purged', v_target
        USING ERRCODE = 'serialization_failure';
    END IF;
    INSERT INTO dlm_locks (resource, resource_crc)
      VALUES (v_target, p_crcs[v_depth])
      ON CONFLICT (resource) DO NOTHING;
  END LOOP;

  -- Every check below is its own statement (a fresh snapshot under READ
  -- COMMITTED): it sees what committed while we waited for the row locks.

  -- Held by a live EXCLUSIVE holder (the row we locked is its newest
  -- version), not this token's: refused in both modes, as the general path
  -- would (most attempts on a busy key end here).
  IF v_row.status = 'HELD' AND v_row.token IS DISTINCT FROM p_token
     AND v_row.expires_at > clock_timestamp() THEN
    v_void := set_config('synchronous_commit', 'off', true);
    acquired := false;
    blocked_by := v_target;
    queued := false;
    RETURN;
  END IF;

  -- Fast path (see the header): an EXCLUSIVE attempt whose key row is free
  -- or expired (and not this token's: a retry is answered below) is
  -- granted in one statement when nothing else is in the way. Liveness is
  -- judged at v_now, a little before the statement runs: a hold that ends
  -- in between counts as live, and the general path decides. The grant's
  -- time is read inside the statement (granted_at), after its snapshot: a
  -- conflicting hold whose release the snapshot sees ended before it (V8;
  -- v_now, read before the snapshot, could precede that release).
  IF NOT p_shared AND NOT (v_row.status = 'HELD'
                           AND (v_row.token = p_token
                                OR v_row.expires_at > clock_timestamp())) THEN
    v_now := clock_timestamp();
    -- The attempting owner's own live request for the key: older requests
    -- of others go first (any, without one).
    WITH mine AS (
      SELECT coalesce((SELECT m.requested_at FROM dlm_lock_requests m
                        WHERE m.resource = v_target AND m.owner_id = v_owner
                          AND m.expires_at > v_now),
                      'infinity'::timestamptz) AS at),
    granted AS (SELECT clock_timestamp() AS at)
    UPDATE dlm_locks l
       SET status = 'HELD', owner_id = v_owner, token = p_token,
           fencing_token = greatest(l.fencing_token,
                                    (SELECT f.floor_token FROM dlm_fencing_floor f
                                      WHERE f.id)) + 1,
           acquired_at = granted.at, ttl_ms = p_ttl_ms,
           expires_at = granted.at + p_ttl_ms * interval '1 millisecond',
           holder_host = p_host, holder_pid = p_pid,
           holder_ip = inet_client_addr()
      FROM granted
     WHERE l.resource = v_target
       -- One index probe per key condition (a condition OR-ed across the
       -- key, its ancestors and its descendant range made a generic plan
       -- scan the whole table: V7).
       -- Any hold of another key in the way, expired ones too (V9): those
       -- are taken over on the general path.
       AND NOT EXISTS (
             SELECT 1 FROM dlm_locks a
              WHERE a.resource = ANY (p_keys[1:v_depth - 1])
                AND a.status = 'HELD')
       AND NOT EXISTS (
             SELECT 1 FROM dlm_locks a
              WHERE a.resource >= p_desc_begin AND a.resource < p_desc_end
                AND a.status = 'HELD')
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE s.resource = v_target AND s.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE s.resource = ANY (p_keys[1:v_depth - 1]))
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_lock_requests r, mine
              WHERE r.resource = v_target
                AND r.owner_id <> v_owner AND r.expires_at > v_now
                AND (r.requested_at, r.owner_id) < (mine.at, v_owner))
       AND NOT EXISTS (
             SELECT 1 FROM dlm_lock_requests r, mine
              WHERE r.resource = ANY (p_keys[1:v_depth - 1])
                AND r.owner_id <> v_owner AND r.expires_at > v_now
                AND (r.requested_at, r.owner_id) < (mine.at, v_owner))
       AND NOT EXISTS (
             SELECT 1 FROM dlm_lock_requests r, mine
              WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                AND r.owner_id <> v_owner AND r.expires_at > v_now
                AND (r.requested_at, r.owner_id) < (mine.at, v_owner))
    RETURNING true, false, l.fencing_token,
              floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
              floor(extract(epoch FROM l.expires_at) * 1000)::bigint,
              EXISTS (SELECT 1 FROM dlm_shared_holds s
                       WHERE s.resource = v_target),
              EXISTS (SELECT 1 FROM dlm_lock_requests m
                       WHERE m.resource = v_target AND m.owner_id = v_owner)
         INTO acquired, queued, fencing_token, acquired_at_ms, expires_at_ms,
              v_stale, v_requested;
    IF FOUND THEN
      -- Expired SHARED holders of the key are taken over; the waiter's own
      -- request ends with the grant (see the general path).
      IF v_stale OR v_requested THEN
        DELETE FROM dlm_shared_holds s WHERE s.resource = v_target;
        DELETE FROM dlm_lock_requests r
         WHERE r.resource = v_target AND r.owner_id = v_owner;
      END IF;
      RETURN;
    END IF;
  END IF;

  -- General path: each check in a statement of its own, naming what is in
  -- the way.
  DECLARE
    v_ancestors text[] := p_keys[1:v_depth - 1];
    v_key       record;
    v_hold      record;
    v_blocker   text;
    v_my_at     timestamptz;
  BEGIN
    acquired := false;
    queued := false;
    SELECT l.status, l.token, l.fencing_token, l.acquired_at, l.expires_at
      INTO v_key FROM dlm_locks l WHERE l.resource = v_target;
    -- Already ours (a retry after a lost reply): answer as the first time.
    IF NOT p_shared AND v_key.status = 'HELD' AND v_key.token = p_token THEN
      acquired := true;
      fencing_token := v_key.fencing_token;
      acquired_at_ms := floor(extract(epoch FROM v_key.acquired_at) * 1000)::bigint;
      expires_at_ms := floor(extract(epoch FROM v_key.expires_at) * 1000)::bigint;
      RETURN;
    END IF;
    IF p_shared THEN
      SELECT * INTO v_hold FROM dlm_shared_holds s
       WHERE s.resource = v_target AND s.token = p_token;
      IF FOUND THEN
        acquired := true;
        fencing_token := v_hold.fencing_token;
        acquired_at_ms := floor(extract(epoch FROM v_hold.acquired_at) * 1000)::bigint;
        expires_at_ms := floor(extract(epoch FROM v_hold.expires_at) * 1000)::bigint;
        RETURN;
      END IF;
    END IF;

    -- Live EXCLUSIVE holds block both modes: the target (the row we locked
    -- is its newest version), an ancestor, a descendant.
    IF v_key.status = 'HELD' AND v_key.expires_at > clock_timestamp() THEN
      v_blocker := v_target;
    END IF;
    IF v_blocker IS NULL AND v_depth > 1 THEN
      SELECT l.resource INTO v_blocker FROM dlm_locks l
        WHERE l.resource = ANY (v_ancestors)
          AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
        ORDER BY l.resource LIMIT 1;
    END IF;
    IF v_blocker IS NULL AND p_desc_begin IS NOT NULL THEN
      SELECT l.resource INTO v_blocker FROM dlm_locks l
        WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
          AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
        ORDER BY l.resource LIMIT 1;
    END IF;

    -- Live SHARED holds block an EXCLUSIVE attempt.
    IF v_blocker IS NULL AND NOT p_shared THEN
      SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
        WHERE s.resource = v_target AND s.expires_at > clock_timestamp()
        LIMIT 1;
      IF v_blocker IS NULL AND v_depth > 1 THEN
        SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
          WHERE s.resource = ANY (v_ancestors)
            AND s.expires_at > clock_timestamp()
          ORDER BY s.resource LIMIT 1;
      END IF;
      IF v_blocker IS NULL AND p_desc_begin IS NOT NULL THEN
        SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
          WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
            AND s.expires_at > clock_timestamp()
          ORDER BY s.resource LIMIT 1;
      END IF;
    END IF;

    -- Fair queueing: an older live request of another owner that conflicts
    -- with this attempt goes first. "Older" than the attempting owner's own
    -- request for the key, by (requested_at, owner_id); any, without one.
    IF v_blocker IS NULL THEN
      SELECT r.requested_at INTO v_my_at FROM dlm_lock_requests r
       WHERE r.resource = v_target AND r.owner_id = v_owner
         AND r.expires_at > clock_timestamp();
      -- One index probe per key condition (see the fast path).
      SELECT q.resource INTO v_blocker FROM (
          SELECT r.resource, r.requested_at, r.owner_id, r.mode, r.expires_at
            FROM dlm_lock_requests r WHERE r.resource = v_target
          UNION ALL
          SELECT r.resource, r.requested_at, r.owner_id, r.mode, r.expires_at
            FROM dlm_lock_requests r WHERE r.resource = ANY (v_ancestors)
          UNION ALL
          SELECT r.resource, r.requested_at, r.owner_id, r.mode, r.expires_at
            FROM dlm_lock_requests r
           WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end) q
       WHERE q.owner_id <> v_owner AND q.expires_at > clock_timestamp()
         AND (NOT p_shared OR q.mode = 'EXCLUSIVE')
         AND (v_my_at IS NULL
              OR (q.requested_at, q.owner_id) < (v_my_at, v_owner))
       ORDER BY q.requested_at, q.owner_id LIMIT 1;
      queued := v_blocker IS NOT NULL;
    END IF;

    -- Refused: commit lazily (the row locks gave us a transaction id, but
    -- nothing a crash could lose changed).
    IF v_blocker IS NOT NULL THEN
      v_void := set_config('synchronous_commit', 'off', true);
      blocked_by := v_blocker;
      RETURN;
    END IF;

    -- Expired holds of other keys in the way are taken over (V9); one
    -- extended while we waited for its row refuses like a live one.
    IF v_depth > 1 OR p_desc_begin IS NOT NULL THEN
      v_blocker := dlm_take_over_expired(v_ancestors, p_desc_begin, p_desc_end,
                                         p_shared);
      IF v_blocker IS NOT NULL THEN
        v_void := set_config('synchronous_commit', 'off', true);
        blocked_by := v_blocker;
        RETURN;
      END IF;
    END IF;

    -- A SHARED hold more than the limit allows (V8) is refused; the key's
    -- row lock (FOR UPDATE above) makes the count exact.
    IF p_shared THEN
      SELECT count(*) INTO v_count FROM (
          SELECT 1 FROM dlm_shared_holds s
           WHERE s.resource = v_target AND s.expires_at > clock_timestamp()
           LIMIT coalesce(v_client.max_shared, 1000)) h;
      IF v_count >= coalesce(v_client.max_shared, 1000) THEN
        RAISE EXCEPTION 'dlm: key "%" has % live SHARED holders (limit max_shared_holders_per_key = %)',
          dlm_shown_key(v_target), v_count, coalesce(v_client.max_shared, 1000)
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END IF;

    -- Grant. A waiter's request for the key ends with it, in this
    -- transaction: a holder whose request row lingered until its separate
    -- unregister call would queue others behind itself, and the wait-for
    -- graph would see its old request wait for the newer requests it
    -- blocks (a deadlock that is not one).
    IF v_my_at IS NOT NULL THEN
      DELETE FROM dlm_lock_requests r
       WHERE r.resource = v_target AND r.owner_id = v_owner;
    END IF;
    -- The key's next fencing token, above the purge floor (V3).
    v_now := clock_timestamp();
    acquired := true;
    acquired_at_ms := floor(extract(epoch FROM v_now) * 1000)::bigint;
    expires_at_ms := floor(extract(epoch FROM
                       v_now + p_ttl_ms * interval '1 millisecond') * 1000)::bigint;
    IF NOT p_shared THEN
      UPDATE dlm_locks l
         SET status = 'HELD', owner_id = v_owner, token = p_token,
             fencing_token = greatest(l.fencing_token,
                                      (SELECT f.floor_token FROM dlm_fencing_floor f
                                        WHERE f.id)) + 1,
             acquired_at = v_now,
             ttl_ms = p_ttl_ms,
             expires_at = v_now + p_ttl_ms * interval '1 millisecond',
             holder_host = p_host, holder_pid = p_pid,
             holder_ip = inet_client_addr()
       WHERE l.resource = v_target
      RETURNING l.fencing_token INTO fencing_token;
      -- Expired SHARED holders of the key are taken over (their extend and
      -- release find nothing). Every hold left here is expired (checked
      -- above).
      DELETE FROM dlm_shared_holds s WHERE s.resource = v_target;
      RETURN;
    END IF;

    -- SHARED: the key's row gives the fencing token; an expired EXCLUSIVE
    -- holder is taken over (FREE, its token gone, so its extend finds
    -- nothing and its release answers false).
    UPDATE dlm_locks l
       SET fencing_token = greatest(l.fencing_token,
                                    (SELECT f.floor_token FROM dlm_fencing_floor f
                                      WHERE f.id)) + 1,
           status = 'FREE',
           token = CASE WHEN l.status = 'HELD' THEN NULL ELSE l.token END,
           expires_at = CASE WHEN l.status = 'HELD'
                             THEN least(l.expires_at, v_now)
                             ELSE l.expires_at END
     WHERE l.resource = v_target
    RETURNING l.fencing_token INTO fencing_token;
    INSERT INTO dlm_shared_holds AS s
        (resource, token, owner_id, fencing_token, acquired_at, ttl_ms,
         expires_at, holder_host, holder_pid, holder_ip)
      VALUES (v_target, p_token, v_owner, fencing_token, v_now, p_ttl_ms,
              v_now + p_ttl_ms * interval '1 millisecond', p_host, p_pid,
              inet_client_addr());
  END;
END
$$;

-- dlm_guard_within: inside the caller's open transaction, checks that
-- p_token holds p_key (its EXCLUSIVE hold, or with p_shared its SHARED
-- hold) with a lease that has not expired (server clock, now), and locks
-- the hold's row until that transaction ends: an EXCLUSIVE hold's (the
-- key's row) FOR SHARE, a SHARED hold's (its own row) FOR KEY SHARE. Every
-- takeover of the hold waits for it (FOR UPDATE, FOR NO KEY UPDATE or a
-- DELETE of that row); other guards of the hold, SHARED co-holders' guards
-- and a SHARED holder's extend do not; an EXCLUSIVE holder's own extend and
-- release (UPDATEs of the key's row) do. Returns the hold's fencing token. DLM01 when the
-- hold is gone or its lease has ended; the caller's transaction is then
-- aborted, so the work it did cannot commit. Changes no row: the row lock
-- is one WAL record in the caller's transaction, flushed with its commit.
CREATE OR REPLACE FUNCTION dlm_guard_within(p_key text, p_token text,
    p_shared boolean) RETURNS bigint
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_fencing bigint;
BEGIN
  IF p_shared THEN
    SELECT s.fencing_token INTO v_fencing FROM dlm_shared_holds s
     WHERE s.resource = p_key AND s.token = p_token
       AND s.expires_at > clock_timestamp()
       FOR KEY SHARE OF s;
  ELSE
    SELECT l.fencing_token INTO v_fencing FROM dlm_locks l
     WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
       AND l.expires_at > clock_timestamp()
       FOR SHARE OF l;
  END IF;
  IF v_fencing IS NULL THEN
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (its lease ended, or it was released or taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  RETURN v_fencing;
END
$$;

-- dlm_extend_shared: as in V8, after FOR KEY SHARE on the key's row, so an
-- EXCLUSIVE takeover of the key (FOR UPDATE on that row) and the extension
-- come one after the other (V9).
CREATE OR REPLACE FUNCTION dlm_extend_shared(p_key text, p_token text, p_ttl_ms bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_expires timestamptz;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0
     OR p_ttl_ms > coalesce((SELECT m.max_ttl_ms FROM dlm_limits m
                              WHERE m.id), 31536000000) THEN
    PERFORM dlm_check_limits(NULL, NULL, p_ttl_ms);
    RAISE EXCEPTION 'dlm_extend_shared: the TTL must be positive'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
  PERFORM 1 FROM dlm_locks l WHERE l.resource = p_key FOR KEY SHARE OF l;
  UPDATE dlm_shared_holds
     SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
         ttl_ms = p_ttl_ms
   WHERE resource = p_key AND token = p_token
  RETURNING expires_at INTO v_expires;
  RETURN floor(extract(epoch FROM v_expires) * 1000)::bigint;
END
$$;

-- Pin every function's search_path to this schema (but the SQL-language
-- helpers', see dlm_owner_digest), once, after the last one is created: pg_catalog first, so no object of another schema can shadow a
-- built-in, and pg_temp last, so a caller's temporary table cannot capture a
-- dlm table's name. SET search_path FROM CURRENT would keep whatever
-- search_path applied the schema (e.g. "$user", public).
DO $$
DECLARE
  v_fn      regprocedure;
  v_inlined boolean;
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  FOR v_fn, v_inlined IN
    SELECT p.oid::regprocedure, l.lanname = 'sql' AND NOT p.prosecdef
      FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proname LIKE 'dlm\_%'
  LOOP
    IF v_inlined THEN
      EXECUTE format('ALTER FUNCTION %s RESET search_path', v_fn);
    ELSE
      EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                     v_fn, current_schema());
    END IF;
  END LOOP;
END
$$;

-- ---------------------------------------------------------- privileges
-- Every grant again, from nothing, as the whole schema file does (V3's
-- rule: what each role may call; functions not named are internal).
-- Nothing for anyone by default (functions are EXECUTE for PUBLIC when
-- created; a DBA may have set default privileges), nothing left of older
-- grants to dlm_client; then exactly what each role needs.
DO $$
DECLARE
  v_client  text := (SELECT value FROM dlm_config WHERE name = 'client_role');
  v_admin   text := (SELECT value FROM dlm_config WHERE name = 'admin_role');
  v_schema  text := current_schema();
  v_grantee text;
  v_rel     text;
  v_fn      regprocedure;
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
    FOR v_rel IN
      SELECT c.relname FROM pg_class c
       WHERE c.relnamespace = v_schema::regnamespace AND c.relkind = 'r'
         AND c.relname LIKE 'dlm\_%'
    LOOP
      EXECUTE format('REVOKE ALL ON TABLE %I.%I FROM %s', v_schema, v_rel,
                     v_grantee);
    END LOOP;
    FOR v_fn IN
      SELECT p.oid::regprocedure FROM pg_proc p
       WHERE p.pronamespace = v_schema::regnamespace
         AND p.proname LIKE 'dlm\_%'
    LOOP
      EXECUTE format('REVOKE ALL ON FUNCTION %s FROM %s', v_fn, v_grantee);
    END LOOP;
  END LOOP;
  -- Older schemas gave dlm_client USAGE on the schema; it keeps it only if
  -- it is still one of the two roles.
  IF 'dlm_client' NOT IN (v_client, v_admin)
     AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dlm_client') THEN
    EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM dlm_client', v_schema);
  END IF;

  -- The admin role can do what the client can (list, lock) and more.
  EXECUTE format('GRANT %I TO %I', v_client, v_admin);
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I', v_schema, v_client,
                 v_admin);

  -- What each role may call (functions not named here are internal).
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_acquire(text[],bigint[],text,text,text,text,bigint,text,bigint) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_acquire(text[],bigint[],text,text,text,text,bigint,text,bigint,boolean) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_describe(text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_extend(text,text,bigint) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_extend_shared(text,text,bigint) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_guard_within(text,text,boolean) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_force_release(text) TO %2$I', v_schema, v_admin);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_holders(text,boolean) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_list_held(text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_list_requests(text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_list_waiters(text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_purge(bigint,integer,boolean) TO %2$I', v_schema, v_admin);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_register_wait(text,text[],text,text,text,bigint) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_register_wait(text,text[],text,text,text,bigint,boolean) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_release(text,text,text[],text,text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_release_shared(text,text,text[],text,text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_release_shared_within(text,text,text[],text,text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_release_within(text,text,text[],text,text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_schema_versions() TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_try_acquire(text[],bigint[],text,text,text,text,bigint,text,bigint,boolean) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_unregister_wait(text,text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_wait_cycle(text,text) TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_list_clients() TO %2$I', v_schema, v_client);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_bind_client(text,text) TO %2$I', v_schema, v_admin);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_unbind_client(text) TO %2$I', v_schema, v_admin);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_cancel_requests(text,text) TO %2$I', v_schema, v_admin);

  -- The pinned search_path names this schema: were the client role able to
  -- create objects in it, it could shadow what the functions call.
  IF has_schema_privilege(v_client, v_schema, 'CREATE') THEN
    RAISE WARNING 'dlm: role % can CREATE in schema %, which the SECURITY DEFINER dlm functions search; revoke it (REVOKE CREATE ON SCHEMA % FROM ...)',
      v_client, v_schema, v_schema;
  END IF;
END
$$;

-- ------------------------------------------------------------ comments
COMMENT ON FUNCTION dlm_take_over_expired(text[], text, text, boolean) IS 'dlm (internal): takes over the expired holds of other keys in an attempt''s way, after their guards.';
COMMENT ON FUNCTION dlm_guard_within(text, text, boolean) IS 'dlm (client): inside the caller''s transaction, requires a live hold by the token and keeps it from being taken over until that transaction ends (FOR KEY SHARE); DLM01 when gone.';

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (9, 'guarded writes', 4)
  ON CONFLICT (version) DO NOTHING;

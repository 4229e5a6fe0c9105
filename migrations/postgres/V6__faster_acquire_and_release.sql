-- dlm migration V6: less server time per acquire and release (issue 12).
-- Applied in one transaction after V5, in the same schema; records version
-- 6. Re-runnable. Behaviour is unchanged; README "Performance" gives the
-- figures.
--
-- What changed, and why each is safe:
-- - dlm_try_acquire: the 10-argument acquire with OUT parameters (one row,
--   no tuplestore), and a fast path for an EXCLUSIVE attempt on a key whose
--   own row is free or expired: the grant is ONE UPDATE of the key's row
--   whose WHERE clause holds every remaining check (ancestors and
--   descendants held, SHARED holds, older conflicting requests), instead of
--   one statement per check. It runs after every row lock was taken, like
--   the separate checks did, so its snapshot sees everything committed
--   while we waited for them; the checks need no later snapshot than that:
--   a conflicting acquisition must lock one of the rows we hold, and cannot
--   commit before we do. When the UPDATE matches nothing, the general path
--   below runs the separate checks to name the blocker (a refusal still
--   queues on the row lock first, which keeps contended throughput).
-- - An attempt on a key whose own row a live EXCLUSIVE holder (another
--   token) has is refused right after the row lock, with the answer the
--   general path's first check gives, skipping the rest.
-- - dlm_acquire (10 arguments) becomes a wrapper of dlm_try_acquire, for
--   the previous release.
-- - dlm_release, dlm_release_within, dlm_release_shared and
--   dlm_release_shared_within: the waiter test rides in the RETURNING
--   clause of the statement that frees the hold (one statement, no nested
--   dlm_notify_waiters call). It reads the request table in the same
--   snapshot as before (taken after the row lock the release waited for);
--   a request registered after it is followed by its owner's own attempt,
--   which queues behind our row lock and sees the freed row.
-- - dlm_locks loses its two CHECK constraints (status in FREE/HELD; a HELD
--   row has a token and an expiry). Every UPDATE re-built them from their
--   stored expressions, about a tenth of a cycle's server time. Only the
--   schema owner can write the table (V4 revoked every other role's DML),
--   and only these functions do; the schema test checks both rules on the
--   rows after its runs.
--
-- Rolling upgrade: every function the previous releases (schemas 4 and 5)
-- call keeps its signature and meaning. compatible_from = 4.

ALTER TABLE dlm_locks DROP CONSTRAINT IF EXISTS dlm_locks_held_has_lease;
ALTER TABLE dlm_locks DROP CONSTRAINT IF EXISTS dlm_locks_status_check;

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_try_acquire: one attempt to take a lock in either mode (p_shared),
-- the whole protocol in one transaction; the 10-argument dlm_acquire's
-- arguments and answer, as one row of OUT parameters.
CREATE OR REPLACE FUNCTION dlm_try_acquire(
    p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text,
    p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint,
    p_shared boolean,
    OUT acquired boolean, OUT fencing_token bigint, OUT acquired_at_ms bigint,
    OUT expires_at_ms bigint, OUT blocked_by text, OUT queued boolean)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
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

  -- Intention locks, as in V3: ancestors FOR SHARE root first (created when
  -- missing or purged meanwhile), then the target FOR UPDATE in both modes.
  IF v_depth > 1 THEN
    v_turns := 0;
    LOOP
      PERFORM 1 FROM dlm_locks l
        WHERE l.resource = ANY (p_keys[1:v_depth - 1])
        ORDER BY l.resource FOR SHARE OF l;
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
  -- in between counts as live, and the general path decides.
  IF NOT p_shared AND NOT (v_row.status = 'HELD'
                           AND (v_row.token = p_token
                                OR v_row.expires_at > clock_timestamp())) THEN
    v_now := clock_timestamp();
    UPDATE dlm_locks l
       SET status = 'HELD', owner_id = p_owner, token = p_token,
           fencing_token = greatest(l.fencing_token,
                                    (SELECT f.floor_token FROM dlm_fencing_floor f
                                      WHERE f.id)) + 1,
           acquired_at = v_now, ttl_ms = p_ttl_ms,
           expires_at = v_now + p_ttl_ms * interval '1 millisecond',
           holder_host = p_host, holder_pid = p_pid,
           holder_ip = inet_client_addr()
     WHERE l.resource = v_target
       AND NOT EXISTS (
             SELECT 1 FROM dlm_locks a
              WHERE (a.resource = ANY (p_keys[1:v_depth - 1])
                     OR (a.resource >= p_desc_begin AND a.resource < p_desc_end))
                AND a.status = 'HELD' AND a.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE (s.resource = v_target
                     OR s.resource = ANY (p_keys[1:v_depth - 1])
                     OR (s.resource >= p_desc_begin AND s.resource < p_desc_end))
                AND s.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_lock_requests r
              WHERE (r.resource = v_target
                     OR r.resource = ANY (p_keys[1:v_depth - 1])
                     OR (r.resource >= p_desc_begin AND r.resource < p_desc_end))
                AND r.owner_id <> p_owner AND r.expires_at > v_now
                AND (r.requested_at, r.owner_id)
                    < (coalesce((SELECT m.requested_at FROM dlm_lock_requests m
                                  WHERE m.resource = v_target
                                    AND m.owner_id = p_owner
                                    AND m.expires_at > v_now),
                                'infinity'::timestamptz), p_owner))
    RETURNING true, false, l.fencing_token,
              floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
              floor(extract(epoch FROM l.expires_at) * 1000)::bigint,
              EXISTS (SELECT 1 FROM dlm_shared_holds s
                       WHERE s.resource = v_target),
              EXISTS (SELECT 1 FROM dlm_lock_requests m
                       WHERE m.resource = v_target AND m.owner_id = p_owner)
         INTO acquired, queued, fencing_token, acquired_at_ms, expires_at_ms,
              v_stale, v_requested;
    IF FOUND THEN
      -- Expired SHARED holders of the key are taken over; the waiter's own
      -- request ends with the grant (see the general path).
      IF v_stale OR v_requested THEN
        DELETE FROM dlm_shared_holds s WHERE s.resource = v_target;
        DELETE FROM dlm_lock_requests r
         WHERE r.resource = v_target AND r.owner_id = p_owner;
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
       WHERE r.resource = v_target AND r.owner_id = p_owner
         AND r.expires_at > clock_timestamp();
      SELECT r.resource INTO v_blocker FROM dlm_lock_requests r
       WHERE (r.resource = v_target OR r.resource = ANY (v_ancestors)
              OR (r.resource >= p_desc_begin AND r.resource < p_desc_end))
         AND r.owner_id <> p_owner AND r.expires_at > clock_timestamp()
         AND (NOT p_shared OR r.mode = 'EXCLUSIVE')
         AND (v_my_at IS NULL
              OR (r.requested_at, r.owner_id) < (v_my_at, p_owner))
       ORDER BY r.requested_at, r.owner_id LIMIT 1;
      queued := v_blocker IS NOT NULL;
    END IF;

    -- Refused: commit lazily (the row locks gave us a transaction id, but
    -- nothing a crash could lose changed).
    IF v_blocker IS NOT NULL THEN
      v_void := set_config('synchronous_commit', 'off', true);
      blocked_by := v_blocker;
      RETURN;
    END IF;

    -- Grant. A waiter's request for the key ends with it, in this
    -- transaction: a holder whose request row lingered until its separate
    -- unregister call would queue others behind itself, and the wait-for
    -- graph would see its old request wait for the newer requests it
    -- blocks (a deadlock that is not one).
    IF v_my_at IS NOT NULL THEN
      DELETE FROM dlm_lock_requests r
       WHERE r.resource = v_target AND r.owner_id = p_owner;
    END IF;
    -- The key's next fencing token, above the purge floor (V3).
    v_now := clock_timestamp();
    acquired := true;
    acquired_at_ms := floor(extract(epoch FROM v_now) * 1000)::bigint;
    expires_at_ms := floor(extract(epoch FROM
                       v_now + p_ttl_ms * interval '1 millisecond') * 1000)::bigint;
    IF NOT p_shared THEN
      UPDATE dlm_locks l
         SET status = 'HELD', owner_id = p_owner, token = p_token,
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
      VALUES (v_target, p_token, p_owner, fencing_token, v_now, p_ttl_ms,
              v_now + p_ttl_ms * interval '1 millisecond', p_host, p_pid,
              inet_client_addr());
  END;
END
$$;

-- dlm_acquire (10 arguments, what schema-5 callers use): dlm_try_acquire
-- as a set of one row.
CREATE OR REPLACE FUNCTION dlm_acquire(
    p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text,
    p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint,
    p_shared boolean)
  RETURNS TABLE (acquired boolean, fencing_token bigint, acquired_at_ms bigint,
                 expires_at_ms bigint, blocked_by text, queued boolean)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
    SELECT a.acquired, a.fencing_token, a.acquired_at_ms, a.expires_at_ms,
           a.blocked_by, a.queued
      FROM dlm_try_acquire(p_keys, p_crcs, p_desc_begin, p_desc_end, p_owner,
                           p_token, p_ttl_ms, p_host, p_pid, p_shared) a;
END
$$;

-- dlm_release: frees the row if p_token still holds it (expired but not
-- taken included). True when freed, or already freed by this same token (a
-- retried release); false when another acquisition took the row since (or
-- a purge deleted it). When it freed the row and someone waits for the key,
-- one of its ancestors or a key in its descendant range (p_ancestors,
-- [p_desc_begin, p_desc_end), as for dlm_acquire), it NOTIFYs dlm_release
-- with the key; nobody waiting, no NOTIFY (a NOTIFY takes a database-wide
-- lock at commit). Lazy commit (synchronous_commit off for this transaction
-- only): a release lost in a crash leaves the lock HELD until its expiry.
CREATE OR REPLACE FUNCTION dlm_release(
    p_key text, p_token text, p_ancestors text[], p_desc_begin text,
    p_desc_end text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  UPDATE dlm_locks l
     SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
  RETURNING EXISTS (
      SELECT 1 FROM dlm_lock_requests r
       WHERE (r.resource = p_key OR r.resource = ANY (p_ancestors)
              OR (r.resource >= p_desc_begin AND r.resource < p_desc_end))
         AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF FOUND THEN
    IF v_wake THEN
      PERFORM pg_notify('dlm_release', p_key);
    END IF;
    RETURN true;
  END IF;
  -- Not HELD by this token: a retried release (the token is still on the
  -- FREE row) answers true without writing anything.
  RETURN EXISTS (SELECT 1 FROM dlm_locks l
                  WHERE l.resource = p_key AND l.token = p_token);
END
$$;

-- dlm_release_within: frees the row inside the CALLER'S open transaction
-- (commitLock), waking waiters as dlm_release does; the release and its
-- NOTIFY take effect only if that transaction commits. Leaves
-- synchronous_commit alone. SQLSTATE DLM01 when p_token no longer holds the
-- row, which aborts the caller's transaction.
CREATE OR REPLACE FUNCTION dlm_release_within(
    p_key text, p_token text, p_ancestors text[], p_desc_begin text,
    p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
BEGIN
  UPDATE dlm_locks l
     SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
  RETURNING EXISTS (
      SELECT 1 FROM dlm_lock_requests r
       WHERE (r.resource = p_key OR r.resource = ANY (p_ancestors)
              OR (r.resource >= p_desc_begin AND r.resource < p_desc_end))
         AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
END
$$;

-- dlm_release_shared: deletes the SHARED hold p_token has on p_key (expired
-- but not taken over included). True when it was there; then wakes the
-- waiters as dlm_release does. Lazy commit, like dlm_release.
CREATE OR REPLACE FUNCTION dlm_release_shared(
    p_key text, p_token text, p_ancestors text[], p_desc_begin text,
    p_desc_end text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  DELETE FROM dlm_shared_holds s WHERE s.resource = p_key AND s.token = p_token
  RETURNING EXISTS (
      SELECT 1 FROM dlm_lock_requests r
       WHERE (r.resource = p_key OR r.resource = ANY (p_ancestors)
              OR (r.resource >= p_desc_begin AND r.resource < p_desc_end))
         AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
  RETURN true;
END
$$;

-- dlm_release_shared_within: the same inside the CALLER'S open transaction
-- (commitLock); SQLSTATE DLM01 when the hold is gone.
CREATE OR REPLACE FUNCTION dlm_release_shared_within(
    p_key text, p_token text, p_ancestors text[], p_desc_begin text,
    p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
BEGIN
  DELETE FROM dlm_shared_holds s WHERE s.resource = p_key AND s.token = p_token
  RETURNING EXISTS (
      SELECT 1 FROM dlm_lock_requests r
       WHERE (r.resource = p_key OR r.resource = ANY (p_ancestors)
              OR (r.resource >= p_desc_begin AND r.resource < p_desc_end))
         AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
END
$$;

-- Pin every function's search_path to this schema (CREATE OR REPLACE above
-- reset it for the replaced ones), as in V3.
DO $$
DECLARE
  v_fn regprocedure;
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  FOR v_fn IN
    SELECT p.oid::regprocedure FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proname LIKE 'dlm\_%'
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
END
$$;

-- ---------------------------------------------------------- privileges
-- The new function: EXECUTE revoked from PUBLIC and the roles, then granted
-- to the client role, as V3 does.
DO $$
DECLARE
  v_client  text := (SELECT value FROM dlm_config WHERE name = 'client_role');
  v_admin   text := (SELECT value FROM dlm_config WHERE name = 'admin_role');
  v_schema  text := current_schema();
  v_grantee text;
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
    EXECUTE format(
      'REVOKE ALL ON FUNCTION '
      '%1$I.dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean) '
      'FROM %2$s', v_schema, v_grantee);
  END LOOP;
  EXECUTE format(
    'GRANT EXECUTE ON FUNCTION '
    '%1$I.dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean) '
    'TO %2$I', v_schema, v_client);
END
$$;

-- ------------------------------------------------------------ comments
COMMENT ON FUNCTION dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean) IS
  'dlm (client): one attempt to take a lock in either mode, hierarchy protocol and fair queueing, one transaction; one row of OUT parameters.';
COMMENT ON FUNCTION dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean) IS
  'dlm (client, schema 5 callers): dlm_try_acquire as a set of one row.';

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (6, 'faster acquire and release', 4)
  ON CONFLICT (version) DO NOTHING;

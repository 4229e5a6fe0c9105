-- dlm migration V8: limits a DBA sets, and an acquisition's time after the
-- end of the hold before it (issue 23). Applied in one transaction after
-- V7, in the same schema; records version 8. Re-runnable.
--
-- - Limits. dlm_limits, one row, holds the caps every call is checked
--   against, for every client alike; the schema owner (DBA) changes them
--   with UPDATE, and the next call applies them. A call over a limit is
--   refused with 22023 (INVALID_ARGUMENT), naming the limit and its value:
--   "... (limit max_keys_per_call = 64)". The TTL (365 days) and key length
--   (8,192 bytes) caps of V7 move here; new are the keys one acquire
--   touches (the key and its ancestors), the live requests of one owner,
--   and the live SHARED holders of one key.
-- - acquired_at. The fast path of dlm_try_acquire took its grant time
--   before the granting statement's snapshot: a conflicting hold (an
--   ancestor's, a descendant's) released in between was seen released,
--   yet the new hold's acquired_at came before that release. The grant
--   time is now read inside the statement, after its snapshot.
-- - dlm_force_release notifies the release channel whenever it freed
--   something, instead of looking for waiters with a condition no index
--   serves (it scanned dlm_lock_requests; a wake-up is a hint).
--
-- Rolling upgrade: no signature changes; libraries for schemas 4 to 7 call
-- the same functions and get the same answers within the limits (the
-- defaults are above what they send, but for 65+ keys in one call, 100+
-- live requests of one owner and 1,000+ SHARED holders of one key).
-- compatible_from = 4.

-- ------------------------------------------------------------- tables

CREATE TABLE IF NOT EXISTS dlm_limits (
    id boolean NOT NULL DEFAULT true PRIMARY KEY CHECK (id),
    max_ttl_ms bigint NOT NULL DEFAULT 31536000000 CHECK (max_ttl_ms > 0),
    max_key_bytes integer NOT NULL DEFAULT 8192 CHECK (max_key_bytes > 0),
    max_keys_per_call integer NOT NULL DEFAULT 64
        CHECK (max_keys_per_call > 0),
    max_requests_per_owner integer NOT NULL DEFAULT 100
        CHECK (max_requests_per_owner > 0),
    max_shared_holders_per_key integer NOT NULL DEFAULT 1000
        CHECK (max_shared_holders_per_key > 0)
);

COMMENT ON TABLE dlm_limits IS 'dlm: one row, the limits every call is checked against (UPDATE to change; the next call applies them).';
COMMENT ON COLUMN dlm_limits.id IS 'Always true: the table has one row.';
COMMENT ON COLUMN dlm_limits.max_ttl_ms IS 'Longest lease an acquire or an extension may ask for (default 365 days).';
COMMENT ON COLUMN dlm_limits.max_key_bytes IS 'Longest scoped key (DC#<farm>#<client>#<id>), in bytes (default 8192).';
COMMENT ON COLUMN dlm_limits.max_keys_per_call IS 'Most keys one acquire or wait touches: the key and its ancestors (default 64).';
COMMENT ON COLUMN dlm_limits.max_requests_per_owner IS 'Most live requests (waits) of one owner at once (default 100).';
COMMENT ON COLUMN dlm_limits.max_shared_holders_per_key IS 'Most live SHARED holders of one key at once (default 1000).';

INSERT INTO dlm_limits (id) VALUES (true) ON CONFLICT (id) DO NOTHING;

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3 (the SQL-language helper is left unpinned, as
-- in V7).

-- dlm_shown_key (internal): a key as a message shows it, at most 64
-- characters and an ellipsis.
CREATE OR REPLACE FUNCTION dlm_shown_key(p_key text) RETURNS text
  LANGUAGE sql IMMUTABLE
AS $$
  SELECT CASE WHEN length(p_key) > 64 THEN left(p_key, 64) || '...'
              ELSE p_key END
$$;

-- dlm_check_limits (internal): refuses (22023, naming the limit) an
-- acquire, a wait or an extension over the limits of dlm_limits: p_key
-- longer than max_key_bytes, p_keys keys (the key and its ancestors) more
-- than max_keys_per_call, a TTL longer than max_ttl_ms. A NULL argument is
-- not checked. Without the row, the defaults apply.
CREATE OR REPLACE FUNCTION dlm_check_limits(p_key text, p_keys integer,
                                            p_ttl_ms bigint)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_max record;
BEGIN
  SELECT coalesce(m.max_ttl_ms, 31536000000) AS ttl,
         coalesce(m.max_key_bytes, 8192) AS key_bytes,
         coalesce(m.max_keys_per_call, 64) AS keys
    INTO v_max
    FROM (SELECT 1) AS one LEFT JOIN dlm_limits m ON m.id;
  IF p_ttl_ms > v_max.ttl THEN
    RAISE EXCEPTION 'dlm: a TTL of % ms (limit max_ttl_ms = %)',
      p_ttl_ms, v_max.ttl
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(p_key) > v_max.key_bytes THEN
    RAISE EXCEPTION 'dlm: key "%" has % bytes (limit max_key_bytes = %)',
      dlm_shown_key(p_key), octet_length(p_key), v_max.key_bytes
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_keys > v_max.keys THEN
    RAISE EXCEPTION 'dlm: % keys in one call (limit max_keys_per_call = %)',
      p_keys, v_max.keys
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- dlm_check_path (internal): the tenancy check of an acquire or a wait for
-- p_key, and its hierarchy checked against the client's recorded setting
-- (recorded by this call when there is none yet): the ancestors and
-- descendant range the caller sent must be the ones the server computes.
-- 22023 otherwise, saying which setting is recorded. The key's length is
-- dlm_check_limits' (V8).
CREATE OR REPLACE FUNCTION dlm_check_path(p_key text, p_ancestors text[],
                                          p_desc_begin text, p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_client record;
  v_scope  text;
  v_sep    text;
  v_hier   boolean;
  v_expect text[];
BEGIN
  SELECT * INTO v_client FROM dlm_client_for(p_key, true);
  -- The setting this call uses: no descendant range, no hierarchy.
  v_hier := p_desc_begin IS NOT NULL OR p_desc_end IS NOT NULL;
  IF v_hier THEN
    v_sep := substr(p_desc_begin, length(p_key) + 1);
    IF NOT starts_with(p_desc_begin, p_key) OR length(v_sep) <> 1
       OR p_desc_end IS DISTINCT FROM p_key || chr(ascii(v_sep) + 1) THEN
      RAISE EXCEPTION 'dlm: the descendant range sent for "%" is not one of its path', p_key
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END IF;
  IF v_client.hierarchy IS NULL THEN
    UPDATE dlm_clients c SET hierarchy = v_hier, separator = v_sep
     WHERE c.client_id = v_client.client_id AND c.hierarchy IS NULL
    RETURNING c.* INTO v_client;
    IF NOT FOUND THEN
      SELECT * INTO v_client FROM dlm_clients c
       WHERE c.client_id = v_client.client_id;
    END IF;
  END IF;
  IF v_client.hierarchy IS DISTINCT FROM v_hier
     OR v_client.separator IS DISTINCT FROM v_sep THEN
    RAISE EXCEPTION 'dlm: client "%" is recorded as %; this call uses %',
      v_client.client_id,
      CASE WHEN v_client.hierarchy
           THEN format('using the hierarchy separator "%s"', v_client.separator)
           ELSE 'using no hierarchy' END,
      CASE WHEN v_hier THEN format('the separator "%s"', v_sep)
           ELSE 'no hierarchy' END
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Configure every instance of a client alike; an admin can forget the recorded setting with dlmctl clients unbind.';
  END IF;
  IF v_hier THEN
    v_scope := dlm_key_scope(p_key);
    v_expect := dlm_path_ancestors(p_key, v_scope, v_sep);
  ELSE
    v_expect := '{}';
  END IF;
  IF coalesce(p_ancestors, '{}') IS DISTINCT FROM v_expect THEN
    RAISE EXCEPTION 'dlm: the ancestors sent for "%" are not those of its path', p_key
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- dlm_try_acquire: one attempt to take a lock in either mode (p_shared),
-- the whole protocol in one transaction; the 10-argument dlm_acquire's
-- arguments and answer, as one row of OUT parameters. V8: the limits are
-- checked with the tenancy, SHARED holders per key before a SHARED grant,
-- and the fast path's grant time is read after its snapshot.
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
       AND NOT EXISTS (
             SELECT 1 FROM dlm_locks a
              WHERE a.resource = ANY (p_keys[1:v_depth - 1])
                AND a.status = 'HELD' AND a.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_locks a
              WHERE a.resource >= p_desc_begin AND a.resource < p_desc_end
                AND a.status = 'HELD' AND a.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE s.resource = v_target AND s.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE s.resource = ANY (p_keys[1:v_depth - 1])
                AND s.expires_at > v_now)
       AND NOT EXISTS (
             SELECT 1 FROM dlm_shared_holds s
              WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
                AND s.expires_at > v_now)
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


-- dlm_extend, dlm_extend_shared: token-conditional lease extension of an
-- EXCLUSIVE or a SHARED hold; NULL when it was lost. A TTL over the limit
-- (max_ttl_ms, V8) is refused.
CREATE OR REPLACE FUNCTION dlm_extend(p_key text, p_token text, p_ttl_ms bigint) RETURNS bigint
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
    RAISE EXCEPTION 'dlm_extend: the TTL must be positive'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Durable like an acquire, whatever the default (see dlm_acquire).
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
  UPDATE dlm_locks
     SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
         ttl_ms = p_ttl_ms
   WHERE resource = p_key AND token = p_token AND status = 'HELD'
  RETURNING expires_at INTO v_expires;
  RETURN floor(extract(epoch FROM v_expires) * 1000)::bigint;
END
$$;

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
  UPDATE dlm_shared_holds
     SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
         ttl_ms = p_ttl_ms
   WHERE resource = p_key AND token = p_token
  RETURNING expires_at INTO v_expires;
  RETURN floor(extract(epoch FROM v_expires) * 1000)::bigint;
END
$$;

-- dlm_register_wait (7 arguments): records (or renews) p_owner's request
-- for p_key in either mode, then walks the wait-for graph from it. The
-- row's lease ends min(p_max_wait_ms, 10 s) from now: a waiter renews it
-- by registering again, which keeps its place in the queue (requested_at)
-- while the lease has not ended; a lapsed one starts again at the back.
-- Returns '{}', or the cycle that waiting would close (then the row is
-- not kept). No table lock (V7): the row is written first, and the caller
-- walks the graph again with dlm_wait_cycle after this commits (see the
-- header). Limits (dlm_check_limits, and requests per owner: V8), tenancy
-- and hierarchy (dlm_check_path) checked. Lazy commit.
CREATE OR REPLACE FUNCTION dlm_register_wait(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_owner text, p_max_wait_ms bigint, p_shared boolean)
  RETURNS text[]
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_now   timestamptz;
  v_owner text;
  v_my_at timestamptz;
  v_max   integer;
  v_count integer;
BEGIN
  IF p_key IS NULL OR p_owner IS NULL OR p_max_wait_ms IS NULL
     OR p_max_wait_ms < 0 OR p_shared IS NULL THEN
    RAISE EXCEPTION 'dlm_register_wait: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM dlm_check_limits(p_key, coalesce(cardinality(p_ancestors), 0) + 1,
                           NULL);
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
  END IF;

  INSERT INTO dlm_lock_requests AS r
      (resource, owner_id, requested_at, expires_at, ancestors, desc_begin,
       desc_end, mode)
    VALUES (p_key, v_owner, coalesce(v_my_at, v_now),
            v_now + least(p_max_wait_ms, 10000) * interval '1 millisecond',
            coalesce(p_ancestors, '{}'), p_desc_begin, p_desc_end,
            CASE WHEN p_shared THEN 'SHARED' ELSE 'EXCLUSIVE' END)
    ON CONFLICT (resource, owner_id) DO UPDATE
      SET requested_at = excluded.requested_at,
          expires_at = excluded.expires_at, ancestors = excluded.ancestors,
          desc_begin = excluded.desc_begin, desc_end = excluded.desc_end,
          mode = excluded.mode;

  RETURN dlm_confirmed_cycle(p_key, coalesce(p_ancestors, '{}'),
                             p_desc_begin, p_desc_end, p_shared,
                             coalesce(v_my_at, v_now), v_owner);
END
$$;

-- dlm_force_release: operator override (admin role only), frees the row
-- whoever holds it (EXCLUSIVE, and every SHARED hold of the key). True if
-- something was held. Announces the release on the channel whenever it
-- freed something (V8): a wake-up is a hint, and finding the key's waiters
-- without the hierarchy the caller knows took a scan of dlm_lock_requests.
CREATE OR REPLACE FUNCTION dlm_force_release(p_key text)
  RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_freed boolean;
BEGIN
  UPDATE dlm_locks SET status = 'FREE', expires_at = least(expires_at, clock_timestamp())
   WHERE resource = p_key AND status = 'HELD';
  v_freed := FOUND;
  DELETE FROM dlm_shared_holds WHERE resource = p_key;
  v_freed := v_freed OR FOUND;
  IF v_freed THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
  RETURN v_freed;
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
COMMENT ON FUNCTION dlm_shown_key(text) IS 'dlm (internal): a key shortened for a message.';
COMMENT ON FUNCTION dlm_check_limits(text, integer, bigint) IS 'dlm (internal): refuses a call over the limits of dlm_limits (22023, naming the limit).';

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (8, 'limits and acquisition time', 4)
  ON CONFLICT (version) DO NOTHING;

-- dlm migration V15: limits on the owner, token and host a call sends.
-- Applied in one transaction after V14, in the same schema; records
-- version 15. Re-runnable.
--
-- Until V14 an acquire stored whatever token and holder host it was given:
-- a 100 MB token and a 32 MB host were accepted, and with that row in the
-- table `dlmctl list` ran for minutes and grew past 15 GB. So dlm_limits
-- gains max_owner_bytes (128, what docs/protocol.md always said),
-- max_token_bytes (128) and max_host_bytes (255), checked before anything
-- is written: dlm_try_acquire checks all three in the statement that
-- already reads dlm_limits on its fast paths (no statement more), and
-- refuses through dlm_check_strings (22023, naming the limit) otherwise;
-- dlm_register_wait checks the owner. The library sends 32-hex-digit
-- owners and tokens and the machine's host name.
--
-- Rolling upgrade: the same signatures; a library of any earlier schema
-- sends owners, tokens and hosts within these limits unless an application
-- chose an owner over 128 bytes, which the library has always refused.
-- compatible_from = 4.

ALTER TABLE dlm_limits
  ADD COLUMN IF NOT EXISTS max_owner_bytes integer NOT NULL DEFAULT 128
    CHECK (max_owner_bytes > 0),
  ADD COLUMN IF NOT EXISTS max_token_bytes integer NOT NULL DEFAULT 128
    CHECK (max_token_bytes > 0),
  ADD COLUMN IF NOT EXISTS max_host_bytes integer NOT NULL DEFAULT 255
    CHECK (max_host_bytes > 0);
COMMENT ON COLUMN dlm_limits.max_owner_bytes IS
  'Longest owner an acquire or a wait may send, in bytes (default 128).';
COMMENT ON COLUMN dlm_limits.max_token_bytes IS
  'Longest acquisition token an acquire may send, in bytes (default 128).';
COMMENT ON COLUMN dlm_limits.max_host_bytes IS
  'Longest holder host an acquire may record, in bytes (default 255).';

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_check_strings (internal): refuses (22023, naming the limit) an owner,
-- token or host longer than dlm_limits allows. A NULL argument is not
-- checked. Without the row, the defaults apply.
CREATE OR REPLACE FUNCTION dlm_check_strings(p_owner text, p_token text, p_host text) RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_max record;
BEGIN
  SELECT coalesce(m.max_owner_bytes, 128) AS owner,
         coalesce(m.max_token_bytes, 128) AS token,
         coalesce(m.max_host_bytes, 255) AS host
    INTO v_max
    FROM (SELECT 1) AS one LEFT JOIN dlm_limits m ON m.id;
  IF octet_length(p_owner) > v_max.owner THEN
    RAISE EXCEPTION 'dlm: an owner of % bytes (limit max_owner_bytes = %)',
      octet_length(p_owner), v_max.owner
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(p_token) > v_max.token THEN
    RAISE EXCEPTION 'dlm: a token of % bytes (limit max_token_bytes = %)',
      octet_length(p_token), v_max.token
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(p_host) > v_max.host THEN
    RAISE EXCEPTION 'dlm: a holder host of % bytes (limit max_host_bytes = %)',
      octet_length(p_host), v_max.host
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;
COMMENT ON FUNCTION dlm_check_strings(text, text, text) IS
  'dlm (internal): refuses an owner, token or host over the limits of dlm_limits (22023, naming the limit).';

-- dlm_try_acquire: one attempt to take a lock in either mode (p_shared),
-- the whole protocol in one transaction; the 10-argument dlm_acquire's
-- arguments and answer, as one row of OUT parameters. V11: see its header;
-- V15: the owner, token and host sizes are among the limits it checks.
CREATE OR REPLACE FUNCTION dlm_try_acquire(p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text, p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint, p_shared boolean, OUT acquired boolean, OUT fencing_token bigint, OUT acquired_at_ms bigint, OUT expires_at_ms bigint, OUT blocked_by text, OUT queued boolean) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
-- Cost note (V11, measured): a call is a transaction of its own, and each
-- SQL statement it runs is set up afresh in it (plan check, relation
-- locks, executor start): about 5 us for a read, 12-15 us for a row lock
-- or an UPDATE, and 5-8 us more for each probe (subplan) a statement
-- holds, against about 0.3 us for a simple expression. So the uncontended
-- EXCLUSIVE grant at depth 1 is two statements (tenancy and row lock; the
-- grant with its probes), and its probes are as few as the checks allow.
DECLARE
  v_depth     integer;
  v_target    text;
  v_count     integer;
  v_turns     integer;
  v_row       record;
  v_now       timestamptz;
  v_requested boolean;
  v_void      text;
  v_owner     text;
  v_client    record;
  v_max_shared integer;
  v_locked    boolean;
  v_anc       record;
  v_anc_held  boolean;
  v_scope     text;
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
  -- The usual call (the client bound to a role of the login, within the
  -- limits, the call's hierarchy the recorded one, the key's rows there):
  -- the tenancy, the limits and the owner's digest come with the first row
  -- locks, in one statement whose conditions filter the rows before they
  -- are locked, so a refused call locks nothing. At depth 1 that statement
  -- locks the key's row; deeper, the ancestors' rows, each checked to be an
  -- ancestor of the key (a prefix of it ending right before a separator
  -- of its id; as many distinct ones as its id has separators, so the set
  -- is exact; rows are locked in key order whatever the order given), and
  -- their status comes with them: an ancestor acquirer updates its row, so
  -- a locking read sees its newest version. The SQL helpers are called on
  -- variables (v_scope, p_owner), so the planner inlines them: called on
  -- an expression (dlm_scope_client(dlm_key_scope(..)), as before) a SQL
  -- function is not inlined and is parsed and planned again on every call.
  -- Any other call takes the steps further below, which check, bind or
  -- refuse.
  v_scope := dlm_key_scope(v_target);
  IF v_depth = 1 THEN
    SELECT l.status, l.token, l.expires_at,
           dlm_owner_digest(p_owner) AS owner,
           m.max_shared_holders_per_key AS max_shared
      INTO v_row
      FROM dlm_locks l, dlm_limits m, dlm_clients c
     WHERE l.resource = v_target
       AND m.id AND p_ttl_ms <= m.max_ttl_ms AND m.max_keys_per_call >= 1
       AND octet_length(v_target) <= m.max_key_bytes
       AND octet_length(p_owner) <= m.max_owner_bytes
       AND octet_length(p_token) <= m.max_token_bytes
       AND octet_length(coalesce(p_host, '')) <= m.max_host_bytes
       AND c.client_id = dlm_scope_client(v_scope)
       AND c.hierarchy = (p_desc_begin IS NOT NULL)
       AND (c.separator IS NULL
            OR (p_desc_begin = v_target || c.separator
                AND p_desc_end = v_target || chr(ascii(c.separator) + 1)
                AND position(c.separator IN
                             substr(v_target, length(v_scope) + 1)) = 0))
       AND pg_has_role(session_user, c.role_oid, 'MEMBER')
     FOR UPDATE OF l;
    IF FOUND THEN
      v_owner := v_row.owner;
      v_max_shared := v_row.max_shared;
      v_locked := true;
    END IF;
  ELSE
    -- The tenancy row first (LATERAL: the ancestors' rows are read, and
    -- locked, only when it passes).
    SELECT count(*) AS n, bool_or(a.status = 'HELD') AS held,
           max(t.max_shared) AS max_shared,
           dlm_owner_digest(p_owner) AS owner
      INTO v_anc
      FROM (SELECT m.max_shared_holders_per_key AS max_shared,
                   c.separator AS sep
              FROM dlm_clients c, dlm_limits m
             WHERE c.client_id = dlm_scope_client(v_scope)
               AND m.id AND p_ttl_ms <= m.max_ttl_ms
               AND v_depth <= m.max_keys_per_call
               AND octet_length(v_target) <= m.max_key_bytes
               AND octet_length(p_owner) <= m.max_owner_bytes
               AND octet_length(p_token) <= m.max_token_bytes
               AND octet_length(coalesce(p_host, '')) <= m.max_host_bytes
               AND c.hierarchy
               AND p_desc_begin = v_target || c.separator
               AND p_desc_end = v_target || chr(ascii(c.separator) + 1)
               AND length(substr(v_target, length(v_scope) + 1))
                   - length(replace(substr(v_target, length(v_scope) + 1),
                                    c.separator, '')) = v_depth - 1
               AND pg_has_role(session_user, c.role_oid, 'MEMBER')) AS t,
           LATERAL (SELECT l.status FROM dlm_locks l
                     WHERE l.resource = ANY (p_keys[1:v_depth - 1])
                       AND length(l.resource) > length(v_scope)
                       AND starts_with(v_target, l.resource)
                       AND substr(v_target, length(l.resource) + 1, 1) = t.sep
                     ORDER BY l.resource
                       FOR KEY SHARE OF l) AS a;
    IF v_anc.n = v_depth - 1 THEN
      v_owner := v_anc.owner;
      v_max_shared := v_anc.max_shared;
      v_anc_held := v_anc.held;
    END IF;
  END IF;

  IF v_owner IS NULL THEN
    -- The caller's tenancy and hierarchy (V7), the limits (V8) and its
    -- owner as recorded: fine when the call is within the limits, the
    -- client is bound to a role of the login and the call's hierarchy is
    -- the recorded one. Otherwise dlm_check_limits refuses, or
    -- dlm_check_path binds the client, records its setting, or refuses.
    SELECT dlm_owner_digest(p_owner) AS owner,
           m.max_shared_holders_per_key AS max_shared,
           coalesce(p_ttl_ms <= m.max_ttl_ms
             AND v_depth <= m.max_keys_per_call
             AND octet_length(v_target) <= m.max_key_bytes
             AND octet_length(p_owner) <= m.max_owner_bytes
             AND octet_length(p_token) <= m.max_token_bytes
             AND octet_length(coalesce(p_host, '')) <= m.max_host_bytes
             AND c.hierarchy IS NOT DISTINCT FROM (p_desc_begin IS NOT NULL)
             AND pg_has_role(session_user, c.role_oid, 'MEMBER')
             AND CASE
                   WHEN c.separator IS NULL THEN v_depth = 1
                   WHEN p_desc_begin IS DISTINCT FROM v_target || c.separator
                        OR p_desc_end IS DISTINCT FROM
                           v_target || chr(ascii(c.separator) + 1) THEN false
                   WHEN v_depth = 1 THEN
                     position(c.separator IN substr(
                       v_target, length(v_scope) + 1)) = 0
                   ELSE p_keys[1:v_depth - 1] = dlm_path_ancestors(
                          v_target, v_scope, c.separator)
                 END, false) AS fine
      INTO v_client
      FROM (SELECT 1) AS one
      LEFT JOIN dlm_limits m ON m.id
      LEFT JOIN dlm_clients c ON c.client_id = dlm_scope_client(v_scope);
    IF NOT v_client.fine THEN
      PERFORM dlm_check_limits(v_target, v_depth, p_ttl_ms);
      PERFORM dlm_check_strings(p_owner, p_token, p_host);
      PERFORM dlm_check_path(v_target, p_keys[1:v_depth - 1], p_desc_begin,
                             p_desc_end);
    END IF;
    v_owner := v_client.owner;
    v_max_shared := v_client.max_shared;

    -- Intention locks (V9): ancestors FOR KEY SHARE root first (created
    -- when missing or purged meanwhile), then the target FOR UPDATE in
    -- both modes. An ancestor's acquirer (FOR UPDATE) still waits for
    -- them; a takeover of an expired ancestor's hold (FOR NO KEY UPDATE,
    -- see dlm_take_over_expired) does not, so siblings never deadlock on it.
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
  END IF;
  IF v_locked IS NULL THEN
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
  END IF;

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

  -- Fast path: an EXCLUSIVE attempt whose key row is free or expired and
  -- not this token's (a retry is answered below) is granted in one
  -- statement when nothing is on the key, its ancestors or its
  -- descendants: no hold of another key (expired ones too: those are taken
  -- over on the general path), no SHARED hold (expired ones too), no live
  -- request of another owner (of any age; the attempting owner's own
  -- request, a waiter's, ends with its grant). Whatever is there, the
  -- general path decides. The ancestors' holds were read with their row
  -- locks above (a call that did not lock them that way, or found one
  -- held, takes the general path). SHARED holds and requests are probed
  -- once over [key, end of its descendant range), which holds the key,
  -- its descendants and a few keys that only share its prefix (they send a
  -- call to the general path, no more); a key without hierarchy probes
  -- [key, key || chr(1)), the key alone. The grant's time is read inside
  -- the statement, after its snapshot (V8).
  IF NOT p_shared AND (v_row.status IS DISTINCT FROM 'HELD'
                       OR v_row.token IS DISTINCT FROM p_token)
     AND (v_depth = 1 OR v_anc_held IS FALSE) THEN
    IF v_depth = 1 THEN
      UPDATE dlm_locks l
         SET status = 'HELD', owner_id = v_owner, token = p_token,
             fencing_token = greatest(l.fencing_token,
                                      (SELECT f.floor_token FROM dlm_fencing_floor f
                                        WHERE f.id)) + 1,
             (acquired_at, expires_at) =
               (SELECT g.at, g.at + p_ttl_ms * interval '1 millisecond'
                  FROM (SELECT clock_timestamp() AS at) AS g),
             ttl_ms = p_ttl_ms,
             holder_host = p_host, holder_pid = p_pid,
             holder_ip = inet_client_addr()
       WHERE l.resource = v_target
         AND NOT EXISTS (
               SELECT 1 FROM dlm_locks a
                WHERE a.resource >= p_desc_begin AND a.resource < p_desc_end
                  AND a.status = 'HELD')
         AND NOT EXISTS (
               SELECT 1 FROM dlm_shared_holds s
                WHERE s.resource >= v_target
                  AND s.resource < coalesce(p_desc_end, v_target || chr(1)))
         AND NOT EXISTS (
               SELECT 1 FROM dlm_lock_requests r
                WHERE r.resource >= v_target
                  AND r.resource < coalesce(p_desc_end, v_target || chr(1))
                  AND r.owner_id <> v_owner
                  AND r.expires_at > clock_timestamp())
      RETURNING true, false, l.fencing_token,
                floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
                floor(extract(epoch FROM l.expires_at) * 1000)::bigint,
                EXISTS (SELECT 1 FROM dlm_lock_requests m
                         WHERE m.resource = v_target AND m.owner_id = v_owner)
           INTO acquired, queued, fencing_token, acquired_at_ms, expires_at_ms,
                v_requested;
    ELSE
      UPDATE dlm_locks l
         SET status = 'HELD', owner_id = v_owner, token = p_token,
             fencing_token = greatest(l.fencing_token,
                                      (SELECT f.floor_token FROM dlm_fencing_floor f
                                        WHERE f.id)) + 1,
             (acquired_at, expires_at) =
               (SELECT g.at, g.at + p_ttl_ms * interval '1 millisecond'
                  FROM (SELECT clock_timestamp() AS at) AS g),
             ttl_ms = p_ttl_ms,
             holder_host = p_host, holder_pid = p_pid,
             holder_ip = inet_client_addr()
       WHERE l.resource = v_target
         AND NOT EXISTS (
               SELECT 1 FROM dlm_locks a
                WHERE a.resource >= p_desc_begin AND a.resource < p_desc_end
                  AND a.status = 'HELD')
         AND NOT EXISTS (
               SELECT 1 FROM dlm_shared_holds s
                WHERE s.resource = ANY (p_keys[1:v_depth - 1]))
         AND NOT EXISTS (
               SELECT 1 FROM dlm_shared_holds s
                WHERE s.resource >= v_target
                  AND s.resource < coalesce(p_desc_end, v_target || chr(1)))
         AND NOT EXISTS (
               SELECT 1 FROM dlm_lock_requests r
                WHERE r.resource = ANY (p_keys[1:v_depth - 1])
                  AND r.owner_id <> v_owner
                  AND r.expires_at > clock_timestamp())
         AND NOT EXISTS (
               SELECT 1 FROM dlm_lock_requests r
                WHERE r.resource >= v_target
                  AND r.resource < coalesce(p_desc_end, v_target || chr(1))
                  AND r.owner_id <> v_owner
                  AND r.expires_at > clock_timestamp())
      RETURNING true, false, l.fencing_token,
                floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
                floor(extract(epoch FROM l.expires_at) * 1000)::bigint,
                EXISTS (SELECT 1 FROM dlm_lock_requests m
                         WHERE m.resource = v_target AND m.owner_id = v_owner)
           INTO acquired, queued, fencing_token, acquired_at_ms, expires_at_ms,
                v_requested;
    END IF;
    IF FOUND THEN
      -- A waiter's request for the key ends with its grant (see the general
      -- path).
      IF v_requested THEN
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
           LIMIT coalesce(v_max_shared, 1000)) h;
      IF v_count >= coalesce(v_max_shared, 1000) THEN
        RAISE EXCEPTION 'dlm: key "%" has % live SHARED holders (limit max_shared_holders_per_key = %)',
          dlm_shown_key(v_target), v_count, coalesce(v_max_shared, 1000)
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


-- dlm_register_wait (7 arguments): records (or renews) p_owner's request
-- for p_key in either mode, then walks the wait-for graph from it. The
-- row's lease ends min(p_max_wait_ms, 10 s) from now: a waiter renews it
-- by registering again, which keeps its place in the queue (requested_at)
-- while the lease has not ended; a lapsed one starts again at the back.
-- Returns '{}', or the cycle that waiting would close (then the row is
-- not kept). No table lock (V7): the row is written first, and the caller
-- walks the graph again with dlm_wait_cycle after this commits (see the
-- header). Limits (dlm_check_limits, requests per owner: V8, the owner's
-- size: V15), tenancy and hierarchy (dlm_check_path) checked. Lazy commit.
CREATE OR REPLACE FUNCTION dlm_register_wait(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text, p_owner text, p_max_wait_ms bigint, p_shared boolean) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
      'dlm_check_strings(text, text, text)',
      'dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean)',
      'dlm_register_wait(text, text[], text, text, text, bigint, boolean)']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
END
$$;

-- A new function is EXECUTE for PUBLIC when created: dlm_check_strings is
-- internal (V9's rule).
DO $$
DECLARE
  v_client  text := (SELECT value FROM dlm_config WHERE name = 'client_role');
  v_admin   text := (SELECT value FROM dlm_config WHERE name = 'admin_role');
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
    EXECUTE format('REVOKE ALL ON FUNCTION %I.dlm_check_strings(text, text, text) FROM %s',
                   current_schema(), v_grantee);
  END LOOP;
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (15, 'limits on owner, token and host sizes', 4)
  ON CONFLICT (version) DO NOTHING;

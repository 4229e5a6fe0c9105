-- dlm migration V17: who made each hold and request, limits per login, and
-- a rebind that cleans up.
-- Applied in one transaction after V16, in the same schema; records
-- version 17. Re-runnable.
--
-- Until V16 a neighbour that used another service's clientId first kept
-- what it had taken after the DBA's remedy: nothing told its holds from
-- the service's, it kept extending them after a rebind (extend checked the
-- token only), its recorded separator kept refusing the service, and the
-- only way out was a force release key by key. Its holds and waits were
-- also limited per owner string, which the caller chooses, not per login.
-- So:
--   * dlm_locks.holder_login, dlm_shared_holds.holder_login and
--     dlm_lock_requests.login record the login (session_user) of the call
--     that made each hold and request; the listings (dlm_describe,
--     dlm_holders, dlm_list_held, dlm_list_requests, dlm_list_waiters)
--     return it, last, as "login", to admins only (NULL for anyone else).
--   * dlm_limits gains max_holds_per_login (10,000 live EXCLUSIVE holds,
--     and as many SHARED) and max_requests_per_login (1,000 live
--     requests): an acquire or a new wait beyond them is refused (22023,
--     naming the limit). An EXCLUSIVE acquire counts the login's live holds
--     in the statement that already checks its tenancy (a partial index on
--     holder_login of HELD rows), at most the limit; concurrent acquires of
--     one login may each see one hold fewer, so a login can pass the limit
--     by as many calls as it runs at once, never more.
--   * dlm_purge_client(client) (admin) force-releases every hold under the
--     client's keys, deletes its requests and forgets its recorded
--     separator and hierarchy (the binding stays): dlmctl clients unbind
--     --purge. dlm_rebind_client(client, role) (admin) binds the client to
--     the role and, in the same transaction, ends the holds and requests
--     of logins outside that role and forgets the recorded separator: the
--     remedy for a squatted client (dlmctl clients bind --purge), safe to
--     repeat.
--   * dlm_extend and dlm_extend_shared are refused (42501) once the login
--     is no longer a member of the role the key's client is bound to: one
--     role lookup on each extension.
--   * dlm_client_for sends a NOTICE (SQLSTATE DL001) from the call that
--     binds a client at first use, so the binding is never silent.
--   * Every function that takes one key refuses (22023) text that is not a
--     key of one client: release, extend, guard, describe and an exact
--     dlm_holders now do too (before they answered "not held").
--
-- Rolling upgrade: the same signatures; the listings return one column
-- more, after those an older library names. compatible_from = 4. The two
-- indexes are built here, holding a SHARE lock on dlm_locks and
-- dlm_lock_requests while they are (a second or so per million rows).

-- ------------------------------------------------------------- tables

ALTER TABLE dlm_locks ADD COLUMN IF NOT EXISTS holder_login text;
ALTER TABLE dlm_shared_holds ADD COLUMN IF NOT EXISTS holder_login text;
ALTER TABLE dlm_lock_requests ADD COLUMN IF NOT EXISTS login text;

COMMENT ON COLUMN dlm_locks.holder_login IS
  'Login (session_user) of the call that made the current (or last) hold; NULL for holds made before V17. Shown to admins only.';
COMMENT ON COLUMN dlm_shared_holds.holder_login IS
  'Login (session_user) of the call that made the hold; NULL for holds made before V17. Shown to admins only.';
COMMENT ON COLUMN dlm_lock_requests.login IS
  'Login (session_user) of the call that made or last renewed the request; NULL before V17. Shown to admins only.';

-- Counting a login's live holds reads only its HELD rows. (An acquire and
-- a release change status, so they were never HOT updates once this
-- index exists; an extension stays one.)
CREATE INDEX IF NOT EXISTS dlm_locks_login_held_idx
  ON dlm_locks (holder_login) WHERE status = 'HELD';
CREATE INDEX IF NOT EXISTS dlm_shared_holds_login_idx
  ON dlm_shared_holds (holder_login);
CREATE INDEX IF NOT EXISTS dlm_lock_requests_login_idx
  ON dlm_lock_requests (login);

ALTER TABLE dlm_limits
  ADD COLUMN IF NOT EXISTS max_holds_per_login integer NOT NULL DEFAULT 10000
    CHECK (max_holds_per_login > 0),
  ADD COLUMN IF NOT EXISTS max_requests_per_login integer NOT NULL DEFAULT 1000
    CHECK (max_requests_per_login > 0);

COMMENT ON COLUMN dlm_limits.max_holds_per_login IS
  'Most live EXCLUSIVE holds of one login at once, and most live SHARED holds (default 10000; concurrent calls of the login may pass it by their number).';
COMMENT ON COLUMN dlm_limits.max_requests_per_login IS
  'Most live requests (waits) of one login at once, whatever owners it uses (default 1000).';

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_check_key (internal): refuses (22023) text that is not a key of one
-- client: DC#<farm>#<client>#<id> or XDC#<client>#<id>, none of them empty.
CREATE OR REPLACE FUNCTION dlm_check_key(p_key text) RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF dlm_scope_client(dlm_key_scope(p_key)) IS NULL THEN
    RAISE EXCEPTION 'dlm: "%" is not a lock key', dlm_shown_key(coalesce(p_key, ''))
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A key is DC#<farm>#<client>#<id> or XDC#<client>#<id>, none of farm, client and id empty, and farm and client without ''#''.';
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_check_key(p_key text) IS
  'dlm (internal): refuses (22023) text that is not a key of one client.';

-- dlm_check_login_holds (internal): refuses (22023, naming the limit) a
-- new hold in the mode p_shared names once the login has
-- max_holds_per_login live ones; a retry of p_token's own hold of p_key
-- is not a new one.
CREATE OR REPLACE FUNCTION dlm_check_login_holds(p_shared boolean, p_key text, p_token text) RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_max   integer;
  v_count integer;
BEGIN
  v_max := coalesce((SELECT m.max_holds_per_login FROM dlm_limits m
                      WHERE m.id), 10000);
  IF p_shared THEN
    IF EXISTS (SELECT 1 FROM dlm_shared_holds s
                WHERE s.resource = p_key AND s.token = p_token) THEN
      RETURN;
    END IF;
    SELECT count(*) INTO v_count FROM (
        SELECT 1 FROM dlm_shared_holds s
         WHERE s.holder_login = session_user::text
           AND s.expires_at > clock_timestamp()
         LIMIT v_max) q;
  ELSE
    IF EXISTS (SELECT 1 FROM dlm_locks l
                WHERE l.resource = p_key AND l.token = p_token
                  AND l.status = 'HELD') THEN
      RETURN;
    END IF;
    SELECT count(*) INTO v_count FROM (
        SELECT 1 FROM dlm_locks l
         WHERE l.holder_login = session_user::text AND l.status = 'HELD'
           AND l.expires_at > clock_timestamp()
         LIMIT v_max) q;
  END IF;
  IF v_count >= v_max THEN
    RAISE EXCEPTION 'dlm: login "%" has % live % holds (limit max_holds_per_login = %)',
      session_user, v_count, CASE WHEN p_shared THEN 'SHARED' ELSE 'EXCLUSIVE' END,
      v_max
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Release what the service no longer needs; an admin can raise the limit (UPDATE dlm_limits SET max_holds_per_login = ...).';
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_check_login_holds(p_shared boolean, p_key text, p_token text) IS
  'dlm (internal): refuses a new hold beyond max_holds_per_login (22023, naming the limit).';

-- dlm_end_client_rows (internal): ends what is under p_client's keys
-- (XDC#<client>#... and DC#<farm>#<client>#... of every farm): its
-- EXCLUSIVE holds are force-released (FREE; fencing tokens kept), its
-- SHARED holds and its requests deleted; with p_keep_role, only those made
-- by a login that is not a member of that role (or by no recorded login:
-- rows from before V17). Wakes the waiters of the first 1,000 keys freed
-- (others retry within their sleepBetweenRetries). Returns how many of
-- each. A scan of the client's XDC keys and of every DC key: an admin's
-- remedy, not a call for a hot path.
CREATE OR REPLACE FUNCTION dlm_end_client_rows(p_client text, p_keep_role oid,
    OUT holds bigint, OUT shared_holds bigint, OUT requests bigint)
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_xdc_from text := 'XDC#' || p_client || '#';
  v_xdc_to   text := 'XDC#' || p_client || '$';
  v_keys     text[];
  v_key      text;
BEGIN
  WITH freed AS (
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
     WHERE l.status = 'HELD'
       AND ((l.resource >= v_xdc_from AND l.resource < v_xdc_to)
            OR (l.resource >= 'DC#' AND l.resource < 'DC$'
                AND dlm_scope_client(dlm_key_scope(l.resource)) = p_client))
       AND (p_keep_role IS NULL
            OR NOT EXISTS (SELECT 1 FROM pg_roles r
                            WHERE r.rolname = l.holder_login
                              AND pg_has_role(r.oid, p_keep_role, 'MEMBER')))
    RETURNING l.resource)
  SELECT coalesce(array_agg(f.resource ORDER BY f.resource), '{}')
    INTO v_keys FROM freed f;
  holds := cardinality(v_keys);
  WITH gone AS (
    DELETE FROM dlm_shared_holds s
     WHERE ((s.resource >= v_xdc_from AND s.resource < v_xdc_to)
            OR (s.resource >= 'DC#' AND s.resource < 'DC$'
                AND dlm_scope_client(dlm_key_scope(s.resource)) = p_client))
       AND (p_keep_role IS NULL
            OR NOT EXISTS (SELECT 1 FROM pg_roles r
                            WHERE r.rolname = s.holder_login
                              AND pg_has_role(r.oid, p_keep_role, 'MEMBER')))
    RETURNING s.resource)
  SELECT count(*), v_keys || coalesce(array_agg(DISTINCT g.resource), '{}')
    INTO shared_holds, v_keys FROM gone g;
  DELETE FROM dlm_lock_requests q
   WHERE ((q.resource >= v_xdc_from AND q.resource < v_xdc_to)
          OR (q.resource >= 'DC#' AND q.resource < 'DC$'
              AND dlm_scope_client(dlm_key_scope(q.resource)) = p_client))
     AND (p_keep_role IS NULL
          OR NOT EXISTS (SELECT 1 FROM pg_roles r
                          WHERE r.rolname = q.login
                            AND pg_has_role(r.oid, p_keep_role, 'MEMBER')));
  GET DIAGNOSTICS requests = ROW_COUNT;
  -- The hints use the separator recorded until now.
  FOREACH v_key IN ARRAY v_keys[1:1000] LOOP
    PERFORM pg_notify('dlm_release', dlm_release_payload(v_key));
  END LOOP;
END
$$;

COMMENT ON FUNCTION dlm_end_client_rows(p_client text, p_keep_role oid, OUT holds bigint, OUT shared_holds bigint, OUT requests bigint) IS
  'dlm (internal): force-releases the holds and deletes the requests under a client''s keys (only those of non-members of a role, when given).';

-- dlm_purge_client (admin): everything under p_client's keys ends
-- (dlm_end_client_rows) and the client's recorded separator and hierarchy
-- are forgotten; its binding stays (bind or unbind it after). The holders
-- find out at their next extend or release, the waiters at their next
-- renewal. 22023 for an empty client id or one with '#'.
CREATE OR REPLACE FUNCTION dlm_purge_client(p_client text)
  RETURNS TABLE(holds bigint, shared_holds bigint, requests bigint)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_client IS NULL OR p_client = '' OR position('#' IN p_client) > 0 THEN
    RAISE EXCEPTION 'dlm_purge_client: a client id is not empty and has no "#"'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY SELECT e.holds, e.shared_holds, e.requests
                 FROM dlm_end_client_rows(p_client, NULL) e;
  UPDATE dlm_clients c SET separator = NULL, hierarchy = NULL
   WHERE c.client_id = p_client;
END
$$;

COMMENT ON FUNCTION dlm_purge_client(p_client text) IS
  'dlm (admin): force-releases every hold and deletes every request under a client''s keys, and forgets its recorded hierarchy setting.';

-- dlm_rebind_client (admin): the remedy for a squatted client, in one
-- transaction: binds p_client to p_role (as dlm_bind_client), forgets its
-- recorded separator and hierarchy, and ends every hold and request under
-- it made by a login that is not a member of p_role (or by no recorded
-- login). The role's members keep theirs, so it is safe to repeat (a
-- squatter's acquire that read the old binding while this ran is ended by
-- the next run). Returns how many were ended. 22023 for an empty client id
-- or one with '#', or a role that does not exist.
CREATE OR REPLACE FUNCTION dlm_rebind_client(p_client text, p_role text)
  RETURNS TABLE(holds bigint, shared_holds bigint, requests bigint)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_oid oid;
BEGIN
  IF p_client IS NULL OR p_client = '' OR position('#' IN p_client) > 0 THEN
    RAISE EXCEPTION 'dlm_rebind_client: a client id is not empty and has no "#"'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT r.oid INTO v_oid FROM pg_roles r WHERE r.rolname = p_role;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'dlm_rebind_client: role "%" does not exist', p_role
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO dlm_clients AS c
      (client_id, role_oid, role_name, first_use, bound_by)
    VALUES (p_client, v_oid, p_role, false, session_user)
    ON CONFLICT (client_id) DO UPDATE
      SET role_oid = excluded.role_oid, role_name = excluded.role_name,
          first_use = false, bound_by = excluded.bound_by,
          bound_at = clock_timestamp(), separator = NULL, hierarchy = NULL;
  RETURN QUERY SELECT e.holds, e.shared_holds, e.requests
                 FROM dlm_end_client_rows(p_client, v_oid) e;
END
$$;

COMMENT ON FUNCTION dlm_rebind_client(p_client text, p_role text) IS
  'dlm (admin): binds a client to a role and, in the same transaction, ends the holds and requests of logins outside it and forgets its recorded hierarchy.';



-- The listings return one column more: dropped and created again (their
-- grants follow below).
DROP FUNCTION IF EXISTS dlm_describe(text);
DROP FUNCTION IF EXISTS dlm_holders(text, boolean);
DROP FUNCTION IF EXISTS dlm_list_held(text);
DROP FUNCTION IF EXISTS dlm_list_requests(text);
DROP FUNCTION IF EXISTS dlm_list_waiters(text);


-- dlm_try_acquire: one attempt to take a lock in either mode (p_shared),
-- the whole protocol in one transaction; the 10-argument dlm_acquire's
-- arguments and answer, as one row of OUT parameters. V11: see its header;
-- V15: the owner, token and host sizes are among the limits it checks.
-- V17: records the login (holder_login) of each hold and refuses a hold
-- beyond max_holds_per_login: an EXCLUSIVE attempt counts the login's live
-- holds in its first statement (the tenancy row), a SHARED one before its
-- grant; the refusal comes from dlm_check_login_holds.
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
       AND (p_shared OR (SELECT count(*) FROM (
              SELECT 1 FROM dlm_locks h
               WHERE h.holder_login = session_user::text AND h.status = 'HELD'
                 AND h.expires_at > clock_timestamp()
               LIMIT (SELECT n.max_holds_per_login FROM dlm_limits n
                       WHERE n.id)) AS q) < m.max_holds_per_login)
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
               AND pg_has_role(session_user, c.role_oid, 'MEMBER')
               AND (p_shared OR (SELECT count(*) FROM (
                      SELECT 1 FROM dlm_locks h
                       WHERE h.holder_login = session_user::text AND h.status = 'HELD'
                         AND h.expires_at > clock_timestamp()
                       LIMIT (SELECT n.max_holds_per_login FROM dlm_limits n
                               WHERE n.id)) AS q) < m.max_holds_per_login)) AS t,
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
             AND (p_shared OR (SELECT count(*) FROM (
                SELECT 1 FROM dlm_locks h
                 WHERE h.holder_login = session_user::text AND h.status = 'HELD'
                   AND h.expires_at > clock_timestamp()
                 LIMIT (SELECT n.max_holds_per_login FROM dlm_limits n
                         WHERE n.id)) AS q) < m.max_holds_per_login)
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
      IF NOT p_shared THEN
        PERFORM dlm_check_login_holds(false, v_target, p_token);
      END IF;
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
             holder_ip = inet_client_addr(), holder_login = session_user
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
             holder_ip = inet_client_addr(), holder_login = session_user
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
             holder_ip = inet_client_addr(), holder_login = session_user
       WHERE l.resource = v_target
      RETURNING l.fencing_token INTO fencing_token;
      -- Expired SHARED holders of the key are taken over (their extend and
      -- release find nothing). Every hold left here is expired (checked
      -- above).
      DELETE FROM dlm_shared_holds s WHERE s.resource = v_target;
      RETURN;
    END IF;

    -- A SHARED hold beyond the login's limit (V17) is refused.
    PERFORM dlm_check_login_holds(true, v_target, p_token);

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
         expires_at, holder_host, holder_pid, holder_ip, holder_login)
      VALUES (v_target, p_token, v_owner, fencing_token, v_now, p_ttl_ms,
              v_now + p_ttl_ms * interval '1 millisecond', p_host, p_pid,
              inet_client_addr(), session_user);
  END;
END
$$;

COMMENT ON FUNCTION dlm_try_acquire(p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text, p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint, p_shared boolean, OUT acquired boolean, OUT fencing_token bigint, OUT acquired_at_ms bigint, OUT expires_at_ms bigint, OUT blocked_by text, OUT queued boolean) IS 'dlm (client): one attempt to take a lock in either mode, hierarchy protocol and fair queueing, one transaction; one row of OUT parameters.';


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
-- V17: records the login, and refuses a new request beyond
-- max_requests_per_login.
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
  v_login integer;
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
       desc_end, mode, login)
    VALUES (p_key, v_owner, coalesce(v_my_at, v_now),
            v_now + least(p_max_wait_ms, 10000) * interval '1 millisecond',
            coalesce(p_ancestors, '{}'), p_desc_begin, p_desc_end,
            CASE WHEN p_shared THEN 'SHARED' ELSE 'EXCLUSIVE' END,
            session_user)
    ON CONFLICT (resource, owner_id) DO UPDATE
      SET requested_at = excluded.requested_at,
          expires_at = excluded.expires_at, ancestors = excluded.ancestors,
          desc_begin = excluded.desc_begin, desc_end = excluded.desc_end,
          mode = excluded.mode, login = excluded.login;

  RETURN dlm_confirmed_cycle(p_key, coalesce(p_ancestors, '{}'),
                             p_desc_begin, p_desc_end, p_shared,
                             coalesce(v_my_at, v_now), v_owner);
END
$$;

COMMENT ON FUNCTION dlm_register_wait(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text, p_owner text, p_max_wait_ms bigint, p_shared boolean) IS 'dlm (client): records or renews a waiter''s request (a lease of at most 10 s) unless waiting would close a cycle (returned).';


-- dlm_extend: token-conditional lease extension, durable; NULL when the
-- lock was lost. V11: the TTL limit is a condition of the UPDATE; a TTL
-- out of range is refused as before.
-- V17: refused (42501) once the login is no longer a member of the role
-- the key's client is bound to (a condition of the UPDATE: one role
-- lookup); a key of no client is refused (22023).
CREATE OR REPLACE FUNCTION dlm_extend(p_key text, p_token text, p_ttl_ms bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_expires_ms bigint;
  v_scope      text := dlm_key_scope(p_key);
BEGIN
  -- Durable like an acquire, whatever the default (see dlm_acquire).
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
  UPDATE dlm_locks l
     SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
         ttl_ms = p_ttl_ms
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
     AND p_ttl_ms > 0
     AND p_ttl_ms <= coalesce((SELECT m.max_ttl_ms FROM dlm_limits m
                                WHERE m.id), 31536000000)
     AND NOT EXISTS (SELECT 1 FROM dlm_clients c
                      WHERE c.client_id = dlm_scope_client(v_scope)
                        AND NOT pg_has_role(session_user, c.role_oid, 'MEMBER'))
  RETURNING floor(extract(epoch FROM l.expires_at) * 1000)::bigint
    INTO v_expires_ms;
  IF FOUND THEN
    RETURN v_expires_ms;
  END IF;
  -- A key of no client (22023), a login no longer a member of the client's
  -- role (42501, V17).
  PERFORM dlm_client_for(p_key, false);
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0
     OR p_ttl_ms > coalesce((SELECT m.max_ttl_ms FROM dlm_limits m
                              WHERE m.id), 31536000000) THEN
    PERFORM dlm_check_limits(NULL, NULL, p_ttl_ms);
    RAISE EXCEPTION 'dlm_extend: the TTL must be positive'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN NULL;
END
$$;

COMMENT ON FUNCTION dlm_extend(p_key text, p_token text, p_ttl_ms bigint) IS 'dlm (client): token-conditional lease extension; NULL when the lock was lost.';


-- dlm_extend_shared: as in V8, after FOR KEY SHARE on the key's row, so an
-- EXCLUSIVE takeover of the key (FOR UPDATE on that row) and the extension
-- come one after the other (V9).
-- V17: as dlm_extend, refused for a login no longer a member of the
-- client's role and for a key of no client.
CREATE OR REPLACE FUNCTION dlm_extend_shared(p_key text, p_token text, p_ttl_ms bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_expires timestamptz;
  v_scope   text := dlm_key_scope(p_key);
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
     AND NOT EXISTS (SELECT 1 FROM dlm_clients c
                      WHERE c.client_id = dlm_scope_client(v_scope)
                        AND NOT pg_has_role(session_user, c.role_oid, 'MEMBER'))
  RETURNING expires_at INTO v_expires;
  IF v_expires IS NULL THEN
    -- As dlm_extend (V17).
    PERFORM dlm_client_for(p_key, false);
  END IF;
  RETURN floor(extract(epoch FROM v_expires) * 1000)::bigint;
END
$$;

COMMENT ON FUNCTION dlm_extend_shared(p_key text, p_token text, p_ttl_ms bigint) IS 'dlm (client): token-conditional extension of a SHARED hold; NULL when lost.';


-- V17: text that is not a key of one client is refused (22023) where
-- nothing was released; the release itself is unchanged.
CREATE OR REPLACE FUNCTION dlm_release(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  IF p_ancestors IS NULL OR cardinality(p_ancestors) = 0 THEN
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
     WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
    RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource >= p_key
                         AND r.resource < coalesce(p_desc_end, p_key || chr(1))
                         AND r.expires_at > clock_timestamp())
      INTO v_wake;
  ELSE
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
     WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
    RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource >= p_key
                         AND r.resource < coalesce(p_desc_end, p_key || chr(1))
                         AND r.expires_at > clock_timestamp())
           OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource = ANY (p_ancestors)
                         AND r.expires_at > clock_timestamp())
      INTO v_wake;
  END IF;
  IF FOUND THEN
    IF v_wake THEN
      PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
    END IF;
    RETURN true;
  END IF;
  -- Not HELD by this token: a key of no client is refused (V17); a retried
  -- release (the token is still on the FREE row) answers true without
  -- writing anything.
  PERFORM dlm_check_key(p_key);
  RETURN EXISTS (SELECT 1 FROM dlm_locks l
                  WHERE l.resource = p_key AND l.token = p_token);
END
$$;

COMMENT ON FUNCTION dlm_release(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) IS 'dlm (client): token-conditional release, lazily committed; wakes waiters.';


-- V17: text that is not a key of one client is refused (22023).
CREATE OR REPLACE FUNCTION dlm_release_shared(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  DELETE FROM dlm_shared_holds s WHERE s.resource = p_key AND s.token = p_token
  RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = p_key
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = ANY (p_ancestors)
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                       AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    PERFORM dlm_check_key(p_key);
    RETURN false;
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
  RETURN true;
END
$$;

COMMENT ON FUNCTION dlm_release_shared(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) IS 'dlm (client): token-conditional release of a SHARED hold, lazily committed; wakes waiters.';


-- V17: text that is not a key of one client is refused (22023).
CREATE OR REPLACE FUNCTION dlm_release_within(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_wake boolean;
BEGIN
  UPDATE dlm_locks l
     SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
  RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = p_key
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = ANY (p_ancestors)
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                       AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    PERFORM dlm_check_key(p_key);
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_release_within(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) IS 'dlm (client): token-conditional release inside the caller''s transaction (commitLock); DLM01 when lost.';


-- V17: text that is not a key of one client is refused (22023).
CREATE OR REPLACE FUNCTION dlm_release_shared_within(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_wake boolean;
BEGIN
  DELETE FROM dlm_shared_holds s WHERE s.resource = p_key AND s.token = p_token
  RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = p_key
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = ANY (p_ancestors)
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                       AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    PERFORM dlm_check_key(p_key);
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_release_shared_within(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) IS 'dlm (client): SHARED release inside the caller''s transaction (commitLock); DLM01 when lost.';


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
-- V17: text that is not a key of one client is refused (22023) rather
-- than answered DLM01.
CREATE OR REPLACE FUNCTION dlm_guard_within(p_key text, p_token text, p_shared boolean) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
    PERFORM dlm_check_key(p_key);
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (its lease ended, or it was released or taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  RETURN v_fencing;
END
$$;

COMMENT ON FUNCTION dlm_guard_within(p_key text, p_token text, p_shared boolean) IS 'dlm (client): inside the caller''s transaction, requires a live hold by the token and keeps it from being taken over until that transaction ends (FOR KEY SHARE); DLM01 when gone.';


-- dlm_client_for (internal): the binding of p_key's client, checked: the
-- key must be one of the two shapes (22023 otherwise), the login a member
-- of the client's role (42501 otherwise, naming both). An unbound client is
-- bound to the login when p_bind (acquire, wait) unless first-use binding
-- is off (42501, naming dlmctl clients bind: V16), else answered as a row
-- with a NULL client_id (release, extend, unregister: only holds and
-- requests made before V7 can be under an unbound client).
-- V17: the call that binds a client at first use sends a NOTICE, SQLSTATE
-- DL001: 'dlm: client "<client>" was bound at first use to role
-- "<role>" (login <login>)'; the library reports it as a warning.
CREATE OR REPLACE FUNCTION dlm_client_for(p_key text, p_bind boolean, OUT client_id text, OUT separator text, OUT hierarchy boolean) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
  v_client       text;
  v_row          record;
  v_lock_timeout text;
  v_bound        integer;
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
    GET DIAGNOSTICS v_bound = ROW_COUNT;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    -- Never silent (V17): the call that bound it says so, once.
    IF v_bound > 0 THEN
      RAISE NOTICE USING ERRCODE = 'DL001',
        MESSAGE = format('dlm: client "%s" was bound at first use to role "%s" (login %s)',
                         v_client, session_user, session_user),
        HINT = 'An admin binds a service''s clients to its role (dlmctl clients bind CLIENT ROLE) and can switch first-use binding off.';
    END IF;
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

COMMENT ON FUNCTION dlm_client_for(p_key text, p_bind boolean, OUT client_id text, OUT separator text, OUT hierarchy boolean) IS 'dlm (internal): the checked binding of a key''s client (42501 for a non-member).';


-- dlm_describe (client): one acquired row of a key, without its token;
-- V17: text that is not a key is refused (22023), and the last column,
-- login, is the holder's login for admins (NULL for anyone else).
CREATE FUNCTION dlm_describe(p_key text) RETURNS TABLE(resource text, status_held boolean, held boolean, owner_id text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, ttl_ms bigint, holder_host text, holder_pid bigint, holder_ip text, login text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all boolean := dlm_is_admin();
BEGIN
  PERFORM dlm_check_key(p_key);
  RETURN QUERY
    SELECT l.resource::text, l.status = 'HELD',
           l.status = 'HELD' AND l.expires_at > clock_timestamp(), l.owner_id,
           l.fencing_token,
           floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
           floor(extract(epoch FROM l.expires_at) * 1000)::bigint, l.ttl_ms,
           l.holder_host, l.holder_pid, host(l.holder_ip),
           CASE WHEN v_all THEN l.holder_login END
      FROM dlm_locks l
     WHERE l.resource = p_key AND l.fencing_token > 0
       AND (v_all OR dlm_visible(l.resource));
END
$$;

COMMENT ON FUNCTION dlm_describe(p_key text) IS 'dlm (client): one acquired lock row, without its token; login for admins (V17).';


-- dlm_holders (client): the holds of both modes of a key (p_exact) or
-- under a prefix, without tokens; V17: an exact key must be a key (22023),
-- and the last column, login, is the holder's login for admins (NULL for
-- anyone else).
CREATE FUNCTION dlm_holders(p_key text, p_exact boolean) RETURNS TABLE(resource text, status_held boolean, held boolean, owner_id text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, ttl_ms bigint, holder_host text, holder_pid bigint, holder_ip text, shared boolean, login text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all    boolean := dlm_is_admin();
  v_from text := coalesce(p_key, '');
  v_end  text := dlm_prefix_end(coalesce(p_key, ''));
  v_now  timestamptz := clock_timestamp();
BEGIN
  IF coalesce(p_exact, false) THEN
    PERFORM dlm_check_key(p_key);
  END IF;
  -- Exactly p_key (primary-key lookups: the branches whose p_exact test
  -- is false are not run), or a primary-key range scan on each table.
  RETURN QUERY
    SELECT h.resource, h.status_held, h.held, h.owner_id, h.fencing_token,
           h.acquired_at_ms, h.expires_at_ms, h.ttl_ms, h.holder_host,
           h.holder_pid, h.holder_ip, h.shared,
           CASE WHEN v_all THEN h.login END
      FROM (
        SELECT l.resource::text AS resource, true AS status_held,
               l.expires_at > v_now AS held, l.owner_id, l.fencing_token,
               floor(extract(epoch FROM l.acquired_at) * 1000)::bigint AS acquired_at_ms,
               floor(extract(epoch FROM l.expires_at) * 1000)::bigint AS expires_at_ms,
               l.ttl_ms, l.holder_host, l.holder_pid,
               host(l.holder_ip) AS holder_ip, false AS shared,
               l.acquired_at AS since, ''::text AS token_order,
               l.holder_login AS login
          FROM dlm_locks l
         WHERE l.status = 'HELD' AND l.resource = v_from
           AND coalesce(p_exact, false)
        UNION ALL
        SELECT l.resource::text, true, l.expires_at > v_now, l.owner_id,
               l.fencing_token,
               floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
               floor(extract(epoch FROM l.expires_at) * 1000)::bigint,
               l.ttl_ms, l.holder_host, l.holder_pid, host(l.holder_ip),
               false, l.acquired_at, ''::text, l.holder_login
          FROM dlm_locks l
         WHERE l.status = 'HELD' AND NOT coalesce(p_exact, false)
           AND l.resource >= v_from AND (v_end IS NULL OR l.resource < v_end)
           AND starts_with(l.resource, v_from)
        UNION ALL
        SELECT s.resource::text, true, s.expires_at > v_now, s.owner_id,
               s.fencing_token,
               floor(extract(epoch FROM s.acquired_at) * 1000)::bigint,
               floor(extract(epoch FROM s.expires_at) * 1000)::bigint,
               s.ttl_ms, s.holder_host, s.holder_pid, host(s.holder_ip),
               true, s.acquired_at, s.token, s.holder_login
          FROM dlm_shared_holds s
         WHERE s.resource = v_from AND coalesce(p_exact, false)
        UNION ALL
        SELECT s.resource::text, true, s.expires_at > v_now, s.owner_id,
               s.fencing_token,
               floor(extract(epoch FROM s.acquired_at) * 1000)::bigint,
               floor(extract(epoch FROM s.expires_at) * 1000)::bigint,
               s.ttl_ms, s.holder_host, s.holder_pid, host(s.holder_ip),
               true, s.acquired_at, s.token, s.holder_login
          FROM dlm_shared_holds s
         WHERE NOT coalesce(p_exact, false)
           AND s.resource >= v_from AND (v_end IS NULL OR s.resource < v_end)
           AND starts_with(s.resource, v_from)) h
     WHERE v_all OR dlm_visible(h.resource)
     ORDER BY h.resource COLLATE "C", h.shared, h.since, h.token_order;
END
$$;

COMMENT ON FUNCTION dlm_holders(p_key text, p_exact boolean) IS 'dlm (client): holds of both modes of a key or under a prefix, without tokens; login for admins (V17).';


-- dlm_list_held (client): HELD rows under a key prefix, without tokens;
-- V17: the last column, login, for admins.
CREATE FUNCTION dlm_list_held(p_prefix text) RETURNS TABLE(resource text, status_held boolean, held boolean, owner_id text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, ttl_ms bigint, holder_host text, holder_pid bigint, holder_ip text, login text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all    boolean := dlm_is_admin();
  v_prefix text := coalesce(p_prefix, '');
  v_end    text := dlm_prefix_end(coalesce(p_prefix, ''));
BEGIN
  -- Two statements rather than "v_end IS NULL OR ...", so that each plan
  -- bounds the index scan as far as it can.
  IF v_end IS NULL THEN
    RETURN QUERY
      SELECT l.resource::text, true, l.expires_at > clock_timestamp(),
             l.owner_id, l.fencing_token,
             floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
             floor(extract(epoch FROM l.expires_at) * 1000)::bigint, l.ttl_ms,
             l.holder_host, l.holder_pid, host(l.holder_ip),
             CASE WHEN v_all THEN l.holder_login END
        FROM dlm_locks l
       WHERE l.status = 'HELD' AND l.resource >= v_prefix
         AND (v_all OR dlm_visible(l.resource))
         AND starts_with(l.resource, v_prefix)
       ORDER BY l.resource;
  ELSE
    RETURN QUERY
      SELECT l.resource::text, true, l.expires_at > clock_timestamp(),
             l.owner_id, l.fencing_token,
             floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
             floor(extract(epoch FROM l.expires_at) * 1000)::bigint, l.ttl_ms,
             l.holder_host, l.holder_pid, host(l.holder_ip),
             CASE WHEN v_all THEN l.holder_login END
        FROM dlm_locks l
       WHERE l.status = 'HELD' AND l.resource >= v_prefix
         AND (v_all OR dlm_visible(l.resource))
         AND l.resource < v_end AND starts_with(l.resource, v_prefix)
       ORDER BY l.resource;
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_list_held(p_prefix text) IS 'dlm (client): HELD rows under a key prefix, without tokens; login for admins (V17).';


-- dlm_list_requests (client): live requests under a key prefix, with
-- their mode; V17: the last column, login, for admins.
CREATE FUNCTION dlm_list_requests(p_prefix text) RETURNS TABLE(resource text, owner_id text, requested_at_ms bigint, expires_at_ms bigint, shared boolean, login text)
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
           r.mode = 'SHARED', CASE WHEN v_all THEN r.login END
      FROM dlm_lock_requests r
     WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
       AND (v_end IS NULL OR r.resource < v_end)
       AND starts_with(r.resource, v_prefix)
     ORDER BY r.resource, r.requested_at, r.owner_id;
END
$$;

COMMENT ON FUNCTION dlm_list_requests(p_prefix text) IS 'dlm (client): live request rows under a key prefix, with their mode; login for admins (V17).';


-- dlm_list_waiters (client): live requests under a key prefix; V17: the
-- last column, login, for admins.
CREATE FUNCTION dlm_list_waiters(p_prefix text) RETURNS TABLE(resource text, owner_id text, requested_at_ms bigint, expires_at_ms bigint, login text)
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
             CASE WHEN v_all THEN r.login END
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
             CASE WHEN v_all THEN r.login END
        FROM dlm_lock_requests r
       WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
         AND r.resource < v_end AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  END IF;
END
$$;

COMMENT ON FUNCTION dlm_list_waiters(p_prefix text) IS 'dlm (client): live request rows under a key prefix; login for admins (V17).';


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
      'dlm_check_key(text)',
      'dlm_check_login_holds(boolean, text, text)',
      'dlm_purge_client(text)',
      'dlm_rebind_client(text, text)',
      'dlm_end_client_rows(text, oid)',
      'dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean)',
      'dlm_register_wait(text, text[], text, text, text, bigint, boolean)',
      'dlm_extend(text, text, bigint)',
      'dlm_extend_shared(text, text, bigint)',
      'dlm_release(text, text, text[], text, text)',
      'dlm_release_shared(text, text, text[], text, text)',
      'dlm_release_within(text, text, text[], text, text)',
      'dlm_release_shared_within(text, text, text[], text, text)',
      'dlm_guard_within(text, text, boolean)',
      'dlm_client_for(text, boolean)',
      'dlm_describe(text)',
      'dlm_holders(text, boolean)',
      'dlm_list_held(text)',
      'dlm_list_requests(text)',
      'dlm_list_waiters(text)']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
END
$$;

-- New and re-created functions are EXECUTE for PUBLIC when created: none
-- for anyone (V9's rule), then the listings for the client role and
-- dlm_purge_client for the admin role; the two checks are internal.
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
        'dlm_check_key(text)', 'dlm_check_login_holds(boolean, text, text)',
        'dlm_purge_client(text)', 'dlm_rebind_client(text, text)',
        'dlm_end_client_rows(text, oid)', 'dlm_describe(text)',
        'dlm_holders(text, boolean)', 'dlm_list_held(text)',
        'dlm_list_requests(text)', 'dlm_list_waiters(text)']
    LOOP
      EXECUTE format('REVOKE ALL ON FUNCTION %I.%s FROM %s',
                     current_schema(), v_fn, v_grantee);
    END LOOP;
  END LOOP;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_describe(text)', 'dlm_holders(text, boolean)', 'dlm_list_held(text)',
      'dlm_list_requests(text)', 'dlm_list_waiters(text)']
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %I.%s TO %I',
                   current_schema(), v_fn, v_client);
  END LOOP;
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.dlm_purge_client(text) TO %I',
                 current_schema(), v_admin);
  EXECUTE format('GRANT EXECUTE ON FUNCTION %I.dlm_rebind_client(text, text) TO %I',
                 current_schema(), v_admin);
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (17, 'logins recorded, limits per login, client purge', 4)
  ON CONFLICT (version) DO NOTHING;

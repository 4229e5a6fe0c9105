-- dlm migration V7: neighbours on one database (issue 22). Applied in one
-- transaction after V6, in the same schema; records version 7.
-- Re-runnable.
--
-- Every service sharing the database logs in with its own role and may call
-- every function the client role may EXECUTE, with any arguments, and hold
-- its own transactions open. This migration makes the database, not the
-- library, keep services apart (docs/design.md, "Neighbours"):
--
-- - Tenancy. dlm_clients binds a client id (the key namespace: the
--   <client> of DC#<farm>#<client>#<id> and XDC#<client>#<id>) to a role. A
--   client nobody bound is bound to the login (session_user) that first
--   acquires or waits under it. From then on a login that is not a member
--   of that role cannot acquire, wait, unregister or walk the wait-for
--   graph under it, nor see its holds and waiters in the listings: SQLSTATE
--   42501 naming the client and the role. Release and extend are not
--   checked (a lookup on every release): they need the acquisition's
--   token, which no listing shows, so a non-member's call finds nothing.
--   The admin role binds, rebinds and unbinds
--   (dlm_bind_client, dlm_unbind_client) and sees every client.
-- - Owner digests. Every function that takes an owner keeps and shows only
--   dlm_owner_digest(owner) (SHA-256, 32 hex digits): what the listings
--   show cannot be sent back to act as that owner. The rows already there
--   are converted below, so callers of every version keep matching their
--   own rows (they send the same secret, the server digests it alike).
-- - The server decides the hierarchy. An acquire or a wait states its
--   ancestors and descendant range (as before); the server computes them
--   from the key and the separator recorded for the client at its first use
--   (or "no hierarchy"), and refuses (22023) a call whose setting or
--   ancestors differ: a forged ancestor list, or an instance configured
--   with another separator or hierarchy(false) for the same client.
-- - Requests are leases. A request row counts for at most 10 s after it was
--   last (re-)registered, whatever the caller asked: the library renews its
--   waiters' rows; a crashed waiter's or a forged row stops counting by
--   itself. An admin cancels requests (dlm_cancel_requests); dlm_purge
--   deletes expired ones.
-- - No serialization point a client can hold. dlm_register_wait no longer
--   takes a table lock (V3): it records the request first, then walks the
--   wait-for graph; dlm_wait_cycle walks it again in a transaction of its
--   own after the registration committed, so of two waits that close a
--   cycle at the same instant the later one to commit sees the other's row.
--   A cycle found is confirmed under row locks on the request rows of its
--   owners (held only within that call) and walked again, so one of its
--   waiters is told (dlm_confirmed_cycle). The walk visits at most 1,000
--   owners; a graph
--   larger than that is not searched to its end (the wait is recorded and
--   ends at its timeout, as before detection existed). It no longer deletes
--   expired rows of others (cost grew with junk).
-- - Caps: a TTL longer than 365 days and a key longer than 8,192 bytes are
--   refused (22023).
--
-- Rolling upgrade: every function the previous releases (schemas 4 to 6)
-- call keeps its signature; their callers are checked like the new ones
-- (tenancy, hierarchy) and their waits become leases too (a previous
-- release's waiter keeps its queue place for 10 s instead of its whole
-- wait; it still retries, so it still gets the lock). compatible_from = 4.

-- ------------------------------------------------------------- tables

CREATE TABLE IF NOT EXISTS dlm_clients (
    client_id text NOT NULL COLLATE "C" PRIMARY KEY,
    role_oid oid NOT NULL,
    role_name text NOT NULL,
    first_use boolean NOT NULL,
    bound_by text NOT NULL,
    bound_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    separator text COLLATE "C" CHECK (length(separator) = 1),
    hierarchy boolean,
    CHECK (hierarchy OR separator IS NULL)
);

COMMENT ON TABLE dlm_clients IS 'dlm: which role may use each client id (key namespace), and the hierarchy setting recorded at its first use.';
COMMENT ON COLUMN dlm_clients.client_id IS 'The <client> of DC#<farm>#<client>#<id> and XDC#<client>#<id> (other keys: the text before their first #).';
COMMENT ON COLUMN dlm_clients.role_oid IS 'The role whose members may use the client.';
COMMENT ON COLUMN dlm_clients.role_name IS 'That role''s name when it was bound (shown if the role is dropped).';
COMMENT ON COLUMN dlm_clients.first_use IS 'True: bound to the login that used it first; false: bound by an admin.';
COMMENT ON COLUMN dlm_clients.bound_by IS 'The login that bound it.';
COMMENT ON COLUMN dlm_clients.bound_at IS 'When (server clock).';
COMMENT ON COLUMN dlm_clients.separator IS 'Hierarchy separator recorded at the first acquire or wait; NULL when the client uses no hierarchy or none was recorded yet.';
COMMENT ON COLUMN dlm_clients.hierarchy IS 'Whether the client uses a hierarchy; NULL until its first acquire or wait records it.';

COMMENT ON COLUMN dlm_locks.owner_id IS 'Digest of the owner of the current (or last) holder (dlm_owner_digest, V7).';
COMMENT ON COLUMN dlm_locks.holder_host IS 'Host name the holder reported (not checked by the server).';
COMMENT ON COLUMN dlm_locks.holder_pid IS 'Process id the holder reported (not checked by the server).';
COMMENT ON COLUMN dlm_shared_holds.owner_id IS 'Digest of the holder''s owner (dlm_owner_digest, V7).';
COMMENT ON COLUMN dlm_shared_holds.holder_host IS 'Host name the holder reported (not checked by the server).';
COMMENT ON COLUMN dlm_shared_holds.holder_pid IS 'Process id the holder reported (not checked by the server).';
COMMENT ON COLUMN dlm_lock_requests.owner_id IS 'Digest of the waiting owner (dlm_owner_digest, V7).';
COMMENT ON COLUMN dlm_lock_requests.expires_at IS 'End of the request''s lease (at most 10 s after it was last registered, V7, and never past the waiter''s deadline); the row no longer counts after it.';

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- The SQL-language helpers below call built-ins only. They are left
-- without a pinned search_path (the pin block at the end resets it), so
-- that the planner inlines them into their callers, whose search_path is
-- pinned: a pinned SQL function (or one whose volatility it cannot keep,
-- hence STABLE for convert_to) is planned afresh in every transaction that
-- calls it, tens of microseconds each. No role may EXECUTE them.

-- dlm_owner_digest (internal): what the tables keep and the listings show
-- of an owner: the first 32 hex digits of SHA-256 of its UTF-8 bytes. The
-- library computes the same to recognise its own rows in listings.
CREATE OR REPLACE FUNCTION dlm_owner_digest(p_owner text) RETURNS text
  LANGUAGE sql STABLE
AS $$
  SELECT left(encode(sha256(convert_to(p_owner, 'UTF8')), 'hex'), 32)
$$;

-- The owners already recorded become digests (a GUID is never 32 hex
-- digits without dashes, so a re-run leaves digests alone).
UPDATE dlm_locks SET owner_id = dlm_owner_digest(owner_id)
 WHERE owner_id IS NOT NULL AND owner_id !~ '^[0-9a-f]{32}$';
UPDATE dlm_shared_holds SET owner_id = dlm_owner_digest(owner_id)
 WHERE owner_id !~ '^[0-9a-f]{32}$';
UPDATE dlm_lock_requests SET owner_id = dlm_owner_digest(owner_id)
 WHERE owner_id !~ '^[0-9a-f]{32}$';

-- dlm_key_scope (internal): the part of a key before its lock id:
-- 'DC#<farm>#<client>#', 'XDC#<client>#', else the text up to and with the
-- first '#', else ''.
CREATE OR REPLACE FUNCTION dlm_key_scope(p_key text) RETURNS text
  LANGUAGE sql IMMUTABLE
AS $$
  SELECT CASE
           WHEN p_key LIKE 'DC#%#%#%' THEN substring(p_key FROM '^DC#[^#]*#[^#]*#')
           WHEN p_key LIKE 'XDC#%#%' THEN substring(p_key FROM '^XDC#[^#]*#')
           ELSE coalesce(substring(p_key FROM '^[^#]*#'), '')
         END
$$;

-- dlm_scope_client (internal): the client id of a key scope.
CREATE OR REPLACE FUNCTION dlm_scope_client(p_scope text) RETURNS text
  LANGUAGE sql IMMUTABLE
AS $$
  SELECT CASE
           WHEN starts_with(p_scope, 'DC#') THEN split_part(p_scope, '#', 3)
           WHEN starts_with(p_scope, 'XDC#') THEN split_part(p_scope, '#', 2)
           ELSE split_part(p_scope, '#', 1)
         END
$$;

-- dlm_is_admin (internal): whether the login is a member of the admin role.
CREATE OR REPLACE FUNCTION dlm_is_admin() RETURNS boolean
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN coalesce((SELECT pg_has_role(session_user, r.oid, 'MEMBER')
                     FROM dlm_config c JOIN pg_roles r ON r.rolname = c.value
                    WHERE c.name = 'admin_role'), false);
END
$$;

-- dlm_visible (internal): whether the login may see the holds and waiters
-- of p_key: its client is unbound or bound to a role the login is a member
-- of. (Admins see everything; the listings test that once, not per row.)
CREATE OR REPLACE FUNCTION dlm_visible(p_key text) RETURNS boolean
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN NOT EXISTS (
    SELECT 1 FROM dlm_clients c
     WHERE c.client_id = dlm_scope_client(dlm_key_scope(p_key))
       AND NOT coalesce(pg_has_role(session_user, c.role_oid, 'MEMBER'),
                        false));
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
  v_client text;
  v_row    record;
BEGIN
  v_client := dlm_scope_client(dlm_key_scope(p_key));
  SELECT * INTO v_row FROM dlm_clients c WHERE c.client_id = v_client;
  IF NOT FOUND THEN
    IF NOT p_bind THEN
      RETURN;
    END IF;
    -- First use. A concurrent first use of the same client waits here for
    -- the other's transaction (bounded by the caller's lock_timeout), then
    -- finds its row.
    INSERT INTO dlm_clients AS c
        (client_id, role_oid, role_name, first_use, bound_by)
      SELECT v_client, r.oid, r.rolname, true, session_user
        FROM pg_roles r WHERE r.rolname = session_user
      ON CONFLICT (client_id) DO NOTHING;
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

-- dlm_path_ancestors (internal): the scoped keys of the ancestors of p_key
-- (whose scope is p_scope) for separator p_sep, root first; '{}' for a
-- one-segment id.
CREATE OR REPLACE FUNCTION dlm_path_ancestors(p_key text, p_scope text,
                                              p_sep text)
  RETURNS text[]
  LANGUAGE plpgsql IMMUTABLE STRICT
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_id    text := substr(p_key, length(p_scope) + 1);
  v_parts text[];
  v_out   text[] := '{}';
BEGIN
  IF position(p_sep IN v_id) = 0 THEN
    RETURN v_out;
  END IF;
  v_parts := string_to_array(v_id, p_sep);
  FOR i IN 1 .. cardinality(v_parts) - 1 LOOP
    v_out := v_out || (p_scope || array_to_string(v_parts[1:i], p_sep));
  END LOOP;
  RETURN v_out;
END
$$;

-- dlm_check_path (internal): the tenancy check of an acquire or a wait for
-- p_key, and its hierarchy checked against the client's recorded setting
-- (recorded by this call when there is none yet): the ancestors and
-- descendant range the caller sent must be the ones the server computes.
-- 22023 otherwise, saying which setting is recorded.
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
  IF octet_length(p_key) > 8192 THEN
    RAISE EXCEPTION 'dlm: key longer than 8192 bytes'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
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
     OR p_ttl_ms > 31536000000 OR p_shared IS NULL THEN
    RAISE EXCEPTION '%', CASE WHEN p_ttl_ms > 31536000000
                              THEN 'dlm_acquire: a TTL is at most 365 days'
                              ELSE 'dlm_acquire: bad arguments' END
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Durable whatever the default (see V3).
  IF current_setting('synchronous_commit') = 'off' THEN
    v_void := set_config('synchronous_commit', 'on', true);
  END IF;
  v_depth := cardinality(p_keys);
  v_target := p_keys[v_depth];
  -- The caller's tenancy and hierarchy (V7) and its owner as recorded, in
  -- one statement (each statement and expression of a call is set up
  -- afresh in its transaction): fine when the client is bound to a role of
  -- the login and the call's hierarchy is the recorded one. Otherwise
  -- dlm_check_path binds the client, records its setting, or refuses.
  SELECT dlm_owner_digest(p_owner) AS owner,
         coalesce(c.hierarchy IS NOT DISTINCT FROM (p_desc_begin IS NOT NULL)
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
    LEFT JOIN dlm_clients c
      ON c.client_id = dlm_scope_client(dlm_key_scope(v_target));
  IF NOT v_client.fine THEN
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
  -- in between counts as live, and the general path decides.
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
                      'infinity'::timestamptz) AS at)
    UPDATE dlm_locks l
       SET status = 'HELD', owner_id = v_owner, token = p_token,
           fencing_token = greatest(l.fencing_token,
                                    (SELECT f.floor_token FROM dlm_fencing_floor f
                                      WHERE f.id)) + 1,
           acquired_at = v_now, ttl_ms = p_ttl_ms,
           expires_at = v_now + p_ttl_ms * interval '1 millisecond',
           holder_host = p_host, holder_pid = p_pid,
           holder_ip = inet_client_addr()
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

CREATE OR REPLACE FUNCTION dlm_release(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
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
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
END
$$;

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
    RETURN false;
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
  RETURN true;
END
$$;

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
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION dlm_extend(p_key text, p_token text, p_ttl_ms bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_expires timestamptz;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 OR p_ttl_ms > 31536000000 THEN
    RAISE EXCEPTION '%', CASE WHEN p_ttl_ms > 31536000000
                              THEN 'dlm_extend: a TTL is at most 365 days'
                              ELSE 'dlm_extend: the TTL must be positive' END
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
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 OR p_ttl_ms > 31536000000 THEN
    RAISE EXCEPTION '%', CASE WHEN p_ttl_ms > 31536000000
                              THEN 'dlm_extend_shared: a TTL is at most 365 days'
                              ELSE 'dlm_extend_shared: the TTL must be positive' END
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

CREATE OR REPLACE FUNCTION dlm_unregister_wait(p_key text, p_owner text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_row record;
BEGIN
  -- Tenancy (V7): only members of the client's role.
  PERFORM dlm_client_for(p_key, false);
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = dlm_owner_digest(p_owner)
  RETURNING r.ancestors, r.desc_begin, r.desc_end INTO v_row;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM dlm_notify_waiters(p_key, v_row.ancestors, v_row.desc_begin,
                             v_row.desc_end);
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION dlm_describe(p_key text) RETURNS TABLE(resource text, status_held boolean, held boolean, owner_id text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, ttl_ms bigint, holder_host text, holder_pid bigint, holder_ip text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all boolean := dlm_is_admin();
BEGIN
  RETURN QUERY
    SELECT l.resource::text, l.status = 'HELD',
           l.status = 'HELD' AND l.expires_at > clock_timestamp(), l.owner_id,
           l.fencing_token,
           floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
           floor(extract(epoch FROM l.expires_at) * 1000)::bigint, l.ttl_ms,
           l.holder_host, l.holder_pid, host(l.holder_ip)
      FROM dlm_locks l
     WHERE l.resource = p_key AND l.fencing_token > 0
       AND (v_all OR dlm_visible(l.resource));
END
$$;

CREATE OR REPLACE FUNCTION dlm_holders(p_key text, p_exact boolean) RETURNS TABLE(resource text, status_held boolean, held boolean, owner_id text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, ttl_ms bigint, holder_host text, holder_pid bigint, holder_ip text, shared boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_all    boolean := dlm_is_admin();
  v_from text := coalesce(p_key, '');
  v_end  text := dlm_prefix_end(coalesce(p_key, ''));
  v_now  timestamptz := clock_timestamp();
BEGIN
  -- Exactly p_key (primary-key lookups: the branches whose p_exact test
  -- is false are not run), or a primary-key range scan on each table.
  RETURN QUERY
    SELECT h.resource, h.status_held, h.held, h.owner_id, h.fencing_token,
           h.acquired_at_ms, h.expires_at_ms, h.ttl_ms, h.holder_host,
           h.holder_pid, h.holder_ip, h.shared
      FROM (
        SELECT l.resource::text AS resource, true AS status_held,
               l.expires_at > v_now AS held, l.owner_id, l.fencing_token,
               floor(extract(epoch FROM l.acquired_at) * 1000)::bigint AS acquired_at_ms,
               floor(extract(epoch FROM l.expires_at) * 1000)::bigint AS expires_at_ms,
               l.ttl_ms, l.holder_host, l.holder_pid,
               host(l.holder_ip) AS holder_ip, false AS shared,
               l.acquired_at AS since, ''::text AS token_order
          FROM dlm_locks l
         WHERE l.status = 'HELD' AND l.resource = v_from
           AND coalesce(p_exact, false)
        UNION ALL
        SELECT l.resource::text, true, l.expires_at > v_now, l.owner_id,
               l.fencing_token,
               floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
               floor(extract(epoch FROM l.expires_at) * 1000)::bigint,
               l.ttl_ms, l.holder_host, l.holder_pid, host(l.holder_ip),
               false, l.acquired_at, ''::text
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
               true, s.acquired_at, s.token
          FROM dlm_shared_holds s
         WHERE s.resource = v_from AND coalesce(p_exact, false)
        UNION ALL
        SELECT s.resource::text, true, s.expires_at > v_now, s.owner_id,
               s.fencing_token,
               floor(extract(epoch FROM s.acquired_at) * 1000)::bigint,
               floor(extract(epoch FROM s.expires_at) * 1000)::bigint,
               s.ttl_ms, s.holder_host, s.holder_pid, host(s.holder_ip),
               true, s.acquired_at, s.token
          FROM dlm_shared_holds s
         WHERE NOT coalesce(p_exact, false)
           AND s.resource >= v_from AND (v_end IS NULL OR s.resource < v_end)
           AND starts_with(s.resource, v_from)) h
     WHERE v_all OR dlm_visible(h.resource)
     ORDER BY h.resource COLLATE "C", h.shared, h.since, h.token_order;
END
$$;

CREATE OR REPLACE FUNCTION dlm_list_held(p_prefix text) RETURNS TABLE(resource text, status_held boolean, held boolean, owner_id text, fencing_token bigint, acquired_at_ms bigint, expires_at_ms bigint, ttl_ms bigint, holder_host text, holder_pid bigint, holder_ip text)
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
             l.holder_host, l.holder_pid, host(l.holder_ip)
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
             l.holder_host, l.holder_pid, host(l.holder_ip)
        FROM dlm_locks l
       WHERE l.status = 'HELD' AND l.resource >= v_prefix
         AND (v_all OR dlm_visible(l.resource))
         AND l.resource < v_end AND starts_with(l.resource, v_prefix)
       ORDER BY l.resource;
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION dlm_list_requests(p_prefix text) RETURNS TABLE(resource text, owner_id text, requested_at_ms bigint, expires_at_ms bigint, shared boolean)
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
           r.mode = 'SHARED'
      FROM dlm_lock_requests r
     WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
       AND (v_end IS NULL OR r.resource < v_end)
       AND starts_with(r.resource, v_prefix)
     ORDER BY r.resource, r.requested_at, r.owner_id;
END
$$;

CREATE OR REPLACE FUNCTION dlm_list_waiters(p_prefix text) RETURNS TABLE(resource text, owner_id text, requested_at_ms bigint, expires_at_ms bigint)
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
             floor(extract(epoch FROM r.expires_at) * 1000)::bigint
        FROM dlm_lock_requests r
       WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
         AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  ELSE
    RETURN QUERY
      SELECT r.resource::text, r.owner_id,
             floor(extract(epoch FROM r.requested_at) * 1000)::bigint,
             floor(extract(epoch FROM r.expires_at) * 1000)::bigint
        FROM dlm_lock_requests r
       WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
       AND (v_all OR dlm_visible(r.resource))
         AND r.resource < v_end AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION dlm_purge(p_idle_for_ms bigint, p_batch integer, p_dry_run boolean) RETURNS TABLE(rows bigint, fencing_floor bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  v_cutoff timestamptz;
  v_keys   text[];
  v_max    bigint;
  v_rows   bigint := 0;
  v_holds  bigint := 0;
  v_floor  bigint;
  v_reqs   bigint := 0;
  v_batch  integer;
BEGIN
  IF p_idle_for_ms IS NULL OR p_idle_for_ms < 0 OR p_batch IS NULL
     OR p_batch <= 0 THEN
    RAISE EXCEPTION 'dlm_purge: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  v_cutoff := clock_timestamp() - p_idle_for_ms * interval '1 millisecond';

  -- Requests whose lease ended at least p_idle_for_ms ago first (V7):
  -- their waiters no longer renew them.
  IF coalesce(p_dry_run, false) THEN
    SELECT count(*) INTO v_reqs FROM (
      SELECT 1 FROM dlm_lock_requests r WHERE r.expires_at < v_cutoff
       LIMIT p_batch) q;
  ELSE
    DELETE FROM dlm_lock_requests r
     WHERE (r.resource, r.owner_id) IN (
             SELECT q.resource, q.owner_id FROM dlm_lock_requests q
              WHERE q.expires_at < v_cutoff
              LIMIT p_batch FOR UPDATE SKIP LOCKED)
       AND r.expires_at < v_cutoff;
    GET DIAGNOSTICS v_reqs = ROW_COUNT;
  END IF;
  v_batch := p_batch - v_reqs;
  IF v_batch <= 0 THEN
    RETURN QUERY SELECT v_reqs, coalesce((SELECT f.floor_token FROM dlm_fencing_floor f WHERE f.id), 0);
    RETURN;
  END IF;

  IF coalesce(p_dry_run, false) THEN
    SELECT count(*) INTO v_holds FROM (
      SELECT 1 FROM dlm_shared_holds s WHERE s.expires_at < v_cutoff
       LIMIT v_batch) h;
    SELECT count(*) INTO v_rows FROM (
      SELECT 1 FROM dlm_locks l
       WHERE (l.expires_at IS NULL OR l.expires_at < v_cutoff)
         AND NOT EXISTS (SELECT 1 FROM dlm_lock_requests r
                          WHERE r.resource = l.resource
                            AND r.expires_at > clock_timestamp())
         AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds s
                          WHERE s.resource = l.resource
                            AND s.expires_at >= v_cutoff)
       LIMIT greatest(v_batch - v_holds, 0)) s;
    SELECT f.floor_token INTO v_floor FROM dlm_fencing_floor f WHERE f.id;
    RETURN QUERY SELECT v_reqs + v_holds + v_rows, coalesce(v_floor, 0);
    RETURN;
  END IF;

  -- Stale SHARED holds first (rows of keys nobody is acquiring right now:
  -- an acquirer of the key holds its dlm_locks row, which SKIP LOCKED
  -- below would skip, but holds are deleted by key only under that row's
  -- lock, so lock it first).
  WITH stale AS (
    SELECT s.resource, s.token FROM dlm_shared_holds s
      JOIN dlm_locks l ON l.resource = s.resource
     WHERE s.expires_at < v_cutoff
     LIMIT v_batch
     FOR UPDATE OF l SKIP LOCKED)
  DELETE FROM dlm_shared_holds s USING stale
   WHERE s.resource = stale.resource AND s.token = stale.token
     AND s.expires_at < v_cutoff;
  GET DIAGNOSTICS v_holds = ROW_COUNT;

  IF v_holds < v_batch THEN
    SELECT array_agg(s.resource), max(s.fencing_token) INTO v_keys, v_max
      FROM (SELECT l.resource, l.fencing_token FROM dlm_locks l
             WHERE (l.expires_at IS NULL OR l.expires_at < v_cutoff)
               AND NOT EXISTS (SELECT 1 FROM dlm_lock_requests r
                                WHERE r.resource = l.resource
                                  AND r.expires_at > clock_timestamp())
               AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds s
                                WHERE s.resource = l.resource)
             LIMIT v_batch - v_holds
             FOR UPDATE OF l SKIP LOCKED) s;
  END IF;

  UPDATE dlm_fencing_floor f
     SET floor_token = greatest(f.floor_token, coalesce(v_max, 0))
   WHERE f.id
  RETURNING f.floor_token INTO v_floor;
  IF v_keys IS NOT NULL THEN
    DELETE FROM dlm_locks l WHERE l.resource = ANY (v_keys)
      AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds s
                       WHERE s.resource = l.resource);
    GET DIAGNOSTICS v_rows = ROW_COUNT;
  END IF;
  RETURN QUERY SELECT v_reqs + v_holds + v_rows, coalesce(v_floor, 0);
END
$$;

-- dlm_wait_blockers (internal): as V5's (the owners a request waits for:
-- owners of live conflicting holds on its key, an ancestor or a
-- descendant, and of older live conflicting requests there), with one
-- index probe per key condition: the key and its ancestors in one
-- `= ANY`, the descendant range in another (V7; an OR of them made a
-- generic plan scan the tables, so every wait cost grew with every row).
CREATE OR REPLACE FUNCTION dlm_wait_blockers(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_shared boolean, p_requested_at timestamptz, p_owner text,
    p_now timestamptz)
  RETURNS TABLE(owner_id text)
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_path text[] := p_key || coalesce(p_ancestors, '{}');
BEGIN
  RETURN QUERY
    SELECT l.owner_id FROM dlm_locks l
     WHERE l.resource = ANY (v_path)
       AND l.status = 'HELD' AND l.expires_at > p_now
       AND l.owner_id IS NOT NULL
    UNION
    SELECT l.owner_id FROM dlm_locks l
     WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
       AND l.status = 'HELD' AND l.expires_at > p_now
       AND l.owner_id IS NOT NULL
    UNION
    SELECT s.owner_id FROM dlm_shared_holds s
     WHERE NOT p_shared AND s.resource = ANY (v_path)
       AND s.expires_at > p_now
    UNION
    SELECT s.owner_id FROM dlm_shared_holds s
     WHERE NOT p_shared
       AND s.resource >= p_desc_begin AND s.resource < p_desc_end
       AND s.expires_at > p_now
    UNION
    SELECT r.owner_id FROM dlm_lock_requests r
     WHERE r.resource = ANY (v_path)
       AND r.owner_id <> p_owner AND r.expires_at > p_now
       AND (NOT p_shared OR r.mode = 'EXCLUSIVE')
       AND (r.requested_at, r.owner_id) < (p_requested_at, p_owner)
    UNION
    SELECT r.owner_id FROM dlm_lock_requests r
     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
       AND r.owner_id <> p_owner AND r.expires_at > p_now
       AND (NOT p_shared OR r.mode = 'EXCLUSIVE')
       AND (r.requested_at, r.owner_id) < (p_requested_at, p_owner);
END
$$;

-- dlm_find_cycle (internal): the wait-for graph walked from a request of
-- p_owner (a digest) for p_key (its ancestors, descendant range and mode,
-- and its age p_my_at for the queue edges): the keys along a cycle back to
-- p_owner, starting with p_key, and the other owners on it; or '{}' and
-- '{}'. Breadth first, each owner once;
-- at most 1,000 owners are visited: past that the walk stops and answers
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
      SELECT r.resource, b.owner_id
        FROM dlm_lock_requests r
        CROSS JOIN LATERAL dlm_wait_blockers(
          r.resource, r.ancestors, r.desc_begin, r.desc_end,
          r.mode = 'SHARED', r.requested_at, r.owner_id, p_now) b
       WHERE r.owner_id = v_owners[v_next] AND r.expires_at > p_now
       ORDER BY r.resource, b.owner_id
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

-- dlm_confirmed_cycle (internal): dlm_find_cycle, and when it finds a cycle
-- the request rows of every owner on it are locked (one order for all
-- callers) and the graph walked again in a new snapshot: of two waits that
-- close a cycle together, the one that locks second finds the first's row
-- deleted (its caller was told, and dropped it) and answers '{}'. So each
-- cycle is reported to one of its waiters, with no lock held between calls.
CREATE OR REPLACE FUNCTION dlm_confirmed_cycle(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_shared boolean, p_my_at timestamptz, p_owner text)
  RETURNS text[]
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_found record;
BEGIN
  SELECT * INTO v_found
    FROM dlm_find_cycle(p_key, p_ancestors, p_desc_begin, p_desc_end,
                        p_shared, p_my_at, p_owner, clock_timestamp());
  IF cardinality(v_found.cycle) = 0 THEN
    RETURN v_found.cycle;
  END IF;
  PERFORM 1 FROM dlm_lock_requests r
    WHERE r.owner_id = ANY (v_found.owners || p_owner)
    ORDER BY r.resource, r.owner_id FOR UPDATE OF r;
  SELECT * INTO v_found
    FROM dlm_find_cycle(p_key, p_ancestors, p_desc_begin, p_desc_end,
                        p_shared, p_my_at, p_owner, clock_timestamp());
  IF cardinality(v_found.cycle) > 0 THEN
    DELETE FROM dlm_lock_requests r
     WHERE r.resource = p_key AND r.owner_id = p_owner;
  END IF;
  RETURN v_found.cycle;
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
-- header). Tenancy and hierarchy checked (dlm_check_path). Lazy commit.
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
BEGIN
  IF p_key IS NULL OR p_owner IS NULL OR p_max_wait_ms IS NULL
     OR p_max_wait_ms < 0 OR p_shared IS NULL THEN
    RAISE EXCEPTION 'dlm_register_wait: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM dlm_check_path(p_key, p_ancestors, p_desc_begin, p_desc_end);
  PERFORM set_config('synchronous_commit', 'off', true);
  v_owner := dlm_owner_digest(p_owner);
  v_now := clock_timestamp();
  SELECT r.requested_at INTO v_my_at FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = v_owner
     AND r.expires_at > v_now;

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

-- dlm_wait_cycle: the wait-for graph walked again from p_owner's live
-- request for p_key, in a transaction of its own after dlm_register_wait
-- committed (so it sees every registration that committed before it): the
-- cycle (the request is then deleted), or '{}' (also when there is no such
-- request).
CREATE OR REPLACE FUNCTION dlm_wait_cycle(p_key text, p_owner text)
  RETURNS text[]
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_owner text;
  v_now   timestamptz;
  v_req   record;
BEGIN
  PERFORM dlm_client_for(p_key, false);
  v_owner := dlm_owner_digest(p_owner);
  v_now := clock_timestamp();
  SELECT * INTO v_req FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = v_owner
     AND r.expires_at > v_now;
  IF NOT FOUND THEN
    RETURN '{}'::text[];
  END IF;
  RETURN dlm_confirmed_cycle(p_key, v_req.ancestors, v_req.desc_begin,
                             v_req.desc_end, v_req.mode = 'SHARED',
                             v_req.requested_at, v_owner);
END
$$;

-- ------------------------------------------------------ admin: tenancy

-- dlm_bind_client (admin): binds client p_client to role p_role (which must
-- exist), or rebinds it; the recorded hierarchy setting stays.
CREATE OR REPLACE FUNCTION dlm_bind_client(p_client text, p_role text)
  RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_oid oid;
BEGIN
  IF p_client IS NULL OR p_client = '' OR position('#' IN p_client) > 0 THEN
    RAISE EXCEPTION 'dlm_bind_client: a client id is not empty and has no "#"'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT r.oid INTO v_oid FROM pg_roles r WHERE r.rolname = p_role;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'dlm_bind_client: role "%" does not exist', p_role
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO dlm_clients AS c
      (client_id, role_oid, role_name, first_use, bound_by)
    VALUES (p_client, v_oid, p_role, false, session_user)
    ON CONFLICT (client_id) DO UPDATE
      SET role_oid = excluded.role_oid, role_name = excluded.role_name,
          first_use = false, bound_by = excluded.bound_by,
          bound_at = clock_timestamp();
END
$$;

-- dlm_unbind_client (admin): forgets the binding of p_client and its
-- recorded hierarchy setting; the next acquire or wait under it binds it
-- again (to its login). True if there was one.
CREATE OR REPLACE FUNCTION dlm_unbind_client(p_client text)
  RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  DELETE FROM dlm_clients c WHERE c.client_id = p_client;
  RETURN FOUND;
END
$$;

-- dlm_list_clients: every binding, by client id. Not secret: it tells a
-- refused service whom to ask.
CREATE OR REPLACE FUNCTION dlm_list_clients()
  RETURNS TABLE(client_id text, role_name text, first_use boolean,
                bound_by text, bound_at_ms bigint, separator text,
                hierarchy boolean)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
    SELECT c.client_id::text, coalesce(r.rolname::text, c.role_name),
           c.first_use, c.bound_by,
           floor(extract(epoch FROM c.bound_at) * 1000)::bigint,
           c.separator::text, c.hierarchy
      FROM dlm_clients c LEFT JOIN pg_roles r ON r.oid = c.role_oid
     ORDER BY c.client_id;
END
$$;

-- dlm_cancel_requests (admin): deletes the requests for exactly p_key, or
-- only p_owner's (an owner as the listings show it) when not NULL, and
-- wakes the waiters they held back. How many were deleted. A cancelled
-- waiter of this release registers again at its next renewal (its wait
-- goes on, at the back of the queue).
CREATE OR REPLACE FUNCTION dlm_cancel_requests(p_key text, p_owner text)
  RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_count integer;
  v_row   record;
BEGIN
  SELECT r.ancestors, r.desc_begin, r.desc_end INTO v_row
    FROM dlm_lock_requests r
   WHERE r.resource = p_key AND (p_owner IS NULL OR r.owner_id = p_owner)
   LIMIT 1;
  DELETE FROM dlm_lock_requests r
   WHERE r.resource = p_key AND (p_owner IS NULL OR r.owner_id = p_owner);
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM dlm_notify_waiters(p_key, v_row.ancestors, v_row.desc_begin,
                               v_row.desc_end);
  END IF;
  RETURN v_count;
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
COMMENT ON FUNCTION dlm_owner_digest(text) IS 'dlm (internal): what is kept and shown of an owner (SHA-256, 32 hex digits).';
COMMENT ON FUNCTION dlm_key_scope(text) IS 'dlm (internal): the part of a key before its lock id.';
COMMENT ON FUNCTION dlm_scope_client(text) IS 'dlm (internal): the client id of a key scope.';
COMMENT ON FUNCTION dlm_is_admin() IS 'dlm (internal): whether the login is a member of the admin role.';
COMMENT ON FUNCTION dlm_visible(text) IS 'dlm (internal): whether the login may see a key''s holds and waiters.';
COMMENT ON FUNCTION dlm_client_for(text, boolean) IS 'dlm (internal): the checked binding of a key''s client (42501 for a non-member).';
COMMENT ON FUNCTION dlm_path_ancestors(text, text, text) IS 'dlm (internal): a key''s ancestors for a separator.';
COMMENT ON FUNCTION dlm_check_path(text, text[], text, text) IS 'dlm (internal): tenancy and recorded hierarchy of an acquire or a wait.';
COMMENT ON FUNCTION dlm_find_cycle(text, text[], text, text, boolean, timestamptz, text, timestamptz) IS 'dlm (internal): the wait-for graph walk, at most 1,000 owners.';
COMMENT ON FUNCTION dlm_confirmed_cycle(text, text[], text, text, boolean, timestamptz, text) IS 'dlm (internal): a cycle found, confirmed under row locks so that one waiter of it is told.';
COMMENT ON FUNCTION dlm_register_wait(text, text[], text, text, text, bigint, boolean) IS 'dlm (client): records or renews a waiter''s request (a lease of at most 10 s) unless waiting would close a cycle (returned).';
COMMENT ON FUNCTION dlm_wait_cycle(text, text) IS 'dlm (client): the wait-for graph walked again from a live request, after its registration committed.';
COMMENT ON FUNCTION dlm_bind_client(text, text) IS 'dlm (admin): binds a client id to a role.';
COMMENT ON FUNCTION dlm_unbind_client(text) IS 'dlm (admin): forgets a client''s binding and recorded hierarchy.';
COMMENT ON FUNCTION dlm_list_clients() IS 'dlm (client): the client bindings.';
COMMENT ON FUNCTION dlm_cancel_requests(text, text) IS 'dlm (admin): deletes the requests of a key (or of one owner on it).';
COMMENT ON FUNCTION dlm_unregister_wait(text, text) IS 'dlm (client): removes the caller''s own request row and wakes those it held back.';
COMMENT ON FUNCTION dlm_purge(bigint, integer, boolean) IS 'dlm (admin): deletes a batch of ended requests and idle rows after raising the fencing floor.';

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (7, 'tenancy owner digests and request leases', 4)
  ON CONFLICT (version) DO NOTHING;

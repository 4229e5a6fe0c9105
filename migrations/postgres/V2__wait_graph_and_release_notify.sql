-- dlm migration V2: waiting and waking (issue 3). Forward-only; applied in one
-- transaction after V1, in the same schema (search_path as for V1); records
-- version 2 in dlm_schema_version. schema/postgres.sql holds the whole
-- current schema.
--
--   * dlm_lock_requests learns the hierarchy of the key waited for
--     (ancestors, descendant range), so deadlock detection can find what
--     blocks another owner's request;
--   * dlm_register_wait / dlm_unregister_wait record and remove a waiter's
--     request row; registering follows the wait-for graph and refuses (and
--     returns the cycle) when waiting would close one;
--   * dlm_release takes the key's hierarchy and announces the release with
--     NOTIFY dlm_release when someone waits for it; dlm_force_release
--     announces too;
--   * dlm_release_within frees a lock inside the application's own
--     transaction (commitLock).

-- What a request blocks on, in the same terms as the acquire: the scoped
-- keys of the waited key's ancestors (root first; empty when it has none or
-- hierarchy is off) and its descendant range [desc_begin, desc_end) (both
-- NULL when hierarchy is off). Byte order, like dlm_locks.resource.
ALTER TABLE dlm_lock_requests
  ADD COLUMN ancestors  text[] COLLATE "C" NOT NULL DEFAULT '{}',
  ADD COLUMN desc_begin text COLLATE "C",
  ADD COLUMN desc_end   text COLLATE "C";

-- dlm_notify_waiters: NOTIFY dlm_release, payload p_key, when an unexpired
-- request row waits for p_key, one of its ancestors (p_ancestors) or a key in
-- its descendant range: exactly the waiters whose acquire the freed row may
-- have blocked. Nobody waiting, no NOTIFY: a NOTIFY makes the commit take a
-- database-wide lock on the notification queue, which would serialise every
-- release. Each test is a lookup or range scan on the primary key of
-- dlm_lock_requests. The notification is sent when the calling transaction
-- commits, and not at all if it rolls back.
CREATE FUNCTION dlm_notify_waiters(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM dlm_lock_requests r
              WHERE r.resource = p_key AND r.expires_at > clock_timestamp())
     OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                 WHERE r.resource = ANY (p_ancestors)
                   AND r.expires_at > clock_timestamp())
     OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                 WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                   AND r.expires_at > clock_timestamp()) THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
END
$$;

-- dlm_release: frees the row if p_token still holds it (expired but not taken
-- included). True when freed, or already freed by this same token (a retried
-- release); false when another acquisition took the row since. When it freed
-- the row it wakes the waiters (dlm_notify_waiters); p_ancestors and
-- [p_desc_begin, p_desc_end) are the key's hierarchy as for dlm_acquire.
--
-- Lazy release: the transaction commits with synchronous_commit = off (local
-- to this transaction only), so a release does not wait for a WAL flush. A
-- release lost in a server crash leaves the lock HELD until its expires_at,
-- which is safe: nobody else held it in between. Acquires keep the durable
-- default, because a lost acquire could let two holders in.
DROP FUNCTION dlm_release(text, text);
CREATE FUNCTION dlm_release(
    p_key text, p_token text, p_ancestors text[], p_desc_begin text,
    p_desc_end text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE dlm_locks SET status = 'FREE'
   WHERE resource = p_key AND token = p_token AND status = 'HELD';
  IF FOUND THEN
    PERFORM dlm_notify_waiters(p_key, p_ancestors, p_desc_begin, p_desc_end);
    RETURN true;
  END IF;
  -- Not HELD by this token: a retried release (the token is still on the
  -- FREE row) answers true without writing anything.
  RETURN EXISTS (SELECT 1 FROM dlm_locks
                  WHERE resource = p_key AND token = p_token);
END
$$;

-- dlm_release_within: frees the row inside the CALLER'S open transaction
-- (commitLock): the release, and its NOTIFY, take effect only if that
-- transaction commits. Called schema-qualified from the application's
-- connection, whose search_path need not name this schema, so the function
-- carries its own search_path (set below to this schema). It leaves
-- synchronous_commit alone: the durability of the application's transaction
-- is the application's choice.
--
-- When p_token no longer holds the row (released, force-released, or expired
-- and taken over) it raises SQLSTATE DLM01, which aborts the caller's
-- transaction: work done without the lock cannot commit.
CREATE FUNCTION dlm_release_within(
    p_key text, p_token text, p_ancestors text[], p_desc_begin text,
    p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  UPDATE dlm_locks SET status = 'FREE'
   WHERE resource = p_key AND token = p_token AND status = 'HELD';
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  PERFORM dlm_notify_waiters(p_key, p_ancestors, p_desc_begin, p_desc_end);
END
$$;
-- Pin its search_path to this schema (pg_catalog first and pg_temp last, so
-- nothing of the caller's can shadow it). The schema's name is only known
-- here; SET search_path FROM CURRENT would keep whatever search_path applied
-- the migration, e.g. "$user", public.
DO $$
BEGIN
  EXECUTE format(
    'ALTER FUNCTION %I.dlm_release_within(text, text, text[], text, text) '
    'SET search_path = pg_catalog, %I, pg_temp',
    current_schema(), current_schema());
END
$$;

-- dlm_force_release: operator override, frees the row whoever holds it. True
-- if it was HELD (expired or not). The holder's token stays on the row, so
-- its later extend finds the lock lost. Wakes the waiters like dlm_release;
-- it knows only the key, so it finds them by the requests' own hierarchy
-- columns (a scan of the small request table; an operator action, rare).
CREATE OR REPLACE FUNCTION dlm_force_release(p_key text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  UPDATE dlm_locks SET status = 'FREE'
   WHERE resource = p_key AND status = 'HELD';
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT 1 FROM dlm_lock_requests r
              WHERE r.expires_at > clock_timestamp()
                AND (r.resource = p_key OR p_key = ANY (r.ancestors)
                     OR (p_key >= r.desc_begin AND p_key < r.desc_end))) THEN
    PERFORM pg_notify('dlm_release', p_key);
  END IF;
  RETURN true;
END
$$;

-- dlm_register_wait: a waiter about to wait for p_key (hierarchy as for
-- dlm_acquire) records its request row, unless waiting would close a cycle
-- in the wait-for graph. Returns the cycle's keys, starting with p_key (each
-- next key is one the holder of the previous one waits for, and p_owner
-- holds a lock blocking the last one), and records nothing; or '{}' after
-- recording (or refreshing) the row, which counts for p_max_wait_ms by the
-- server clock. Also deletes expired request rows. Expired holds and
-- requests are not part of the graph.
--
-- Serialised: two owners registering opposite waits at once must not both
-- miss the cycle (each reading the graph before the other's row exists).
-- LOCK TABLE ... SHARE ROW EXCLUSIVE conflicts with itself and with row
-- writes (ROW EXCLUSIVE: unregistering), but not with the plain reads of
-- dlm_notify_waiters, so releases never wait for it. It is chosen over an
-- advisory lock because it is scoped to this schema's table (advisory keys
-- are database-wide, so two dlm schemas in one database would serialise
-- each other or need a key scheme), needs no privilege beyond the table's,
-- shows up in pg_locks under the table's name, and ends with the
-- transaction. Each statement after it takes a new snapshot (READ
-- COMMITTED), so it sees every registration committed before it got the lock.
--
-- Lazy commit: a request row lost in a crash only costs a deadlock going
-- undetected until the waiters' timeouts, which is what happens without it.
CREATE FUNCTION dlm_register_wait(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_owner text, p_max_wait_ms bigint)
  RETURNS text[]
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
DECLARE
  v_now    timestamptz;
  -- Breadth-first search over owners. v_owners[i] was reached through
  -- v_via[i], the key it holds a blocker of (p_key for the first level, else
  -- the key v_owners[v_parent[i]] waits for); v_parent[i] = 0 on the first
  -- level. The path to an owner is its chain of v_via, root first.
  v_owners text[] := '{}';
  v_parent integer[] := '{}';
  v_via    text[] := '{}';
  v_next   integer := 1;
  v_at     integer;
  v_cycle  text[];
  v_hop    record;
BEGIN
  IF p_key IS NULL OR p_owner IS NULL OR p_max_wait_ms IS NULL
     OR p_max_wait_ms < 0 THEN
    RAISE EXCEPTION 'dlm_register_wait: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  LOCK TABLE dlm_lock_requests IN SHARE ROW EXCLUSIVE MODE;
  PERFORM set_config('synchronous_commit', 'off', true);
  v_now := clock_timestamp();
  DELETE FROM dlm_lock_requests r WHERE r.expires_at <= v_now;

  -- First level: live holders of p_key, an ancestor or a descendant
  -- (primary-key lookups and a range scan on dlm_locks).
  FOR v_hop IN
    SELECT DISTINCT l.owner_id FROM dlm_locks l
     WHERE l.status = 'HELD' AND l.expires_at > v_now
       AND l.owner_id IS NOT NULL
       AND (l.resource = p_key OR l.resource = ANY (p_ancestors)
            OR (l.resource >= p_desc_begin AND l.resource < p_desc_end))
     ORDER BY l.owner_id
  LOOP
    -- The caller holds what it is about to wait for: a cycle of one.
    IF v_hop.owner_id = p_owner THEN
      RETURN ARRAY[p_key];
    END IF;
    v_owners := v_owners || v_hop.owner_id;
    v_parent := v_parent || 0;
    v_via := v_via || p_key;
  END LOOP;

  -- Next levels: what each reached owner waits for (dlm_lock_requests_owner_idx)
  -- and who holds a blocker of that.
  WHILE v_next <= cardinality(v_owners) LOOP
    FOR v_hop IN
      SELECT r.resource, b.owner_id
        FROM dlm_lock_requests r
        CROSS JOIN LATERAL (
          SELECT l.owner_id FROM dlm_locks l
           WHERE l.resource = r.resource
             AND l.status = 'HELD' AND l.expires_at > v_now
          UNION
          SELECT l.owner_id FROM dlm_locks l
           WHERE l.resource = ANY (r.ancestors)
             AND l.status = 'HELD' AND l.expires_at > v_now
          UNION
          SELECT l.owner_id FROM dlm_locks l
           WHERE l.resource >= r.desc_begin AND l.resource < r.desc_end
             AND l.status = 'HELD' AND l.expires_at > v_now) b
       WHERE r.owner_id = v_owners[v_next] AND r.expires_at > v_now
         AND b.owner_id IS NOT NULL
       ORDER BY r.resource, b.owner_id
    LOOP
      IF v_hop.owner_id = p_owner THEN
        -- Back at the caller: the path to v_owners[v_next], then this key.
        v_cycle := ARRAY[v_hop.resource];
        v_at := v_next;
        WHILE v_at > 0 LOOP
          v_cycle := v_via[v_at] || v_cycle;
          v_at := v_parent[v_at];
        END LOOP;
        RETURN v_cycle;
      END IF;
      IF NOT (v_hop.owner_id = ANY (v_owners)) THEN
        v_owners := v_owners || v_hop.owner_id;
        v_parent := v_parent || v_next;
        v_via := v_via || v_hop.resource;
      END IF;
    END LOOP;
    v_next := v_next + 1;
  END LOOP;

  -- No cycle: record the wait (a repeated registration keeps requested_at,
  -- when the wait began, and moves the deadline).
  INSERT INTO dlm_lock_requests AS r
      (resource, owner_id, requested_at, expires_at, ancestors, desc_begin,
       desc_end)
    VALUES (p_key, p_owner, v_now,
            v_now + p_max_wait_ms * interval '1 millisecond',
            coalesce(p_ancestors, '{}'), p_desc_begin, p_desc_end)
    ON CONFLICT (resource, owner_id) DO UPDATE
      SET expires_at = excluded.expires_at, ancestors = excluded.ancestors,
          desc_begin = excluded.desc_begin, desc_end = excluded.desc_end;
  RETURN '{}'::text[];
END
$$;

-- dlm_unregister_wait: deletes p_owner's request row for p_key. True if there
-- was one. Lazy commit, like the registration: a lost delete leaves a row
-- that expires.
CREATE FUNCTION dlm_unregister_wait(p_key text, p_owner text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM dlm_lock_requests WHERE resource = p_key AND owner_id = p_owner;
  RETURN FOUND;
END
$$;

-- The functions run with the caller's rights; dlm_client already has the row
-- rights they use (V1). LOCK TABLE ... SHARE ROW EXCLUSIVE needs UPDATE or
-- DELETE on the table, which it has.
GRANT EXECUTE ON FUNCTION
  dlm_notify_waiters(text, text[], text, text),
  dlm_release(text, text, text[], text, text),
  dlm_release_within(text, text, text[], text, text),
  dlm_register_wait(text, text[], text, text, text, bigint),
  dlm_unregister_wait(text, text)
  TO dlm_client;

INSERT INTO dlm_schema_version (version, description)
  VALUES (2, 'wait graph and release notify');

-- dlm: the whole current PostgreSQL schema, for a fresh database.
--
-- It is what applying migrations/postgres/V1.. in order gives (today: V1 and
-- V2); a test (tests/postgres) checks that both produce the same catalog.
-- A database that already has an older dlm schema gets the missing
-- migrations instead.
--
-- Objects are created UNQUALIFIED, in the first schema of search_path (the
-- one current_schema() names), so a DBA picks the schema:
--
--   psql -v ON_ERROR_STOP=1 -1 -f <this file> "dbname=app"
--   PGOPTIONS='-c search_path=locks' psql -v ON_ERROR_STOP=1 -1 -f <this file> "dbname=app"
--
-- (-1: the whole file is one transaction; the second form puts everything in
-- the existing schema "locks"; the application then sets
-- PostgresStoreOptions::schema = "locks" or has that search_path.) The role
-- applying it needs CREATE on the schema, and CREATEROLE the first time in a
-- cluster (it creates the role dlm_client if missing).
--
-- Privileges: the library needs no DDL. This file creates the NOLOGIN role
-- dlm_client with exactly what the library uses; give it to the
-- application's login role with
--
--   GRANT dlm_client TO app;
--
-- `dlmctl migrate` (or the builder's applyMigrations opt-in) applies the same
-- migration files from code, each in one transaction.

-- Which migrations have been applied: initialize() reads max(version) and
-- refuses to run against a schema older or newer than the library.
CREATE TABLE dlm_schema_version (
  -- n of migrations/postgres/V<n>__*.sql.
  version     integer PRIMARY KEY,
  -- The file's <what> part, for humans.
  description text NOT NULL,
  -- When it was applied (server clock).
  applied_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per resource ever locked. A release sets status back to FREE and
-- never deletes the row, so fencing_token keeps growing across acquisitions.
-- Rows change only inside the dlm_* functions below (row locks taken with
-- SELECT ... FOR SHARE / FOR UPDATE).
--
-- There is deliberately no index on status or expires_at: the only indexed
-- column is the key, so acquire, release and extend are HOT updates (no index
-- maintenance, no index bloat), and the fillfactor leaves room on each page
-- for the new row versions they need.
CREATE TABLE dlm_locks (
  -- The full scoped key ("DC#farm#client#a.b.c"). Byte order (COLLATE "C"):
  -- the primary key index serves the lookup by key, the root-first ordering
  -- of ancestors (a prefix sorts before its extensions) and the descendant
  -- range scan [key || '.', key || '/').
  resource      text COLLATE "C" PRIMARY KEY,
  -- CRC-32 of resource, computed by the client, for tools that look rows up
  -- by hash.
  resource_crc  bigint,
  -- HELD while a lease is on the row (expired ones included: expiry is judged
  -- against expires_at, not by a status change).
  status        text NOT NULL DEFAULT 'FREE' CHECK (status IN ('FREE', 'HELD')),
  -- Owner GUID of the current (or last) holder.
  owner_id      text,
  -- Per-acquisition token; release and extend are conditional on it. Kept
  -- after release so a retried release by the same token still answers true;
  -- the next acquisition overwrites it.
  token         text,
  -- Grows by one with every acquisition of this row; the first gets 1.
  fencing_token bigint NOT NULL DEFAULT 0,
  -- Server clock (clock_timestamp()) at acquisition.
  acquired_at   timestamptz,
  -- The lease length last asked for (by the acquisition or an extension).
  ttl_ms        bigint,
  -- The lease ends here; a HELD row past it can be taken by anyone.
  expires_at    timestamptz,
  -- Who holds it, for operators: host name and process id the client sent,
  -- and the client address as the server saw it (NULL over a unix socket).
  holder_host   text,
  holder_pid    bigint,
  holder_ip     inet,
  -- A held row always has a lease to judge and a token to release by.
  CONSTRAINT dlm_locks_held_has_lease
    CHECK (status = 'FREE' OR (token IS NOT NULL AND expires_at IS NOT NULL))
) WITH (fillfactor = 80);

-- Waiters: one row per owner waiting in acquireLock for a key, removed when
-- the wait ends. Read to follow the wait-for graph (owner waits for key, key
-- is held by owner, ...) for deadlock detection.
CREATE TABLE dlm_lock_requests (
  -- The scoped key waited for. The primary key serves "who waits for this
  -- key" and makes a repeated request an upsert.
  resource     text COLLATE "C" NOT NULL,
  -- The waiting owner GUID.
  owner_id     text NOT NULL,
  -- When the wait began (server clock).
  requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- A waiter that crashed leaves its row behind; rows past this instant are
  -- stale and ignored (a live waiter keeps pushing it forward).
  expires_at   timestamptz,
  -- What the request blocks on, in the same terms as the acquire: the scoped
  -- keys of the waited key's ancestors (root first; empty when it has none
  -- or hierarchy is off) and its descendant range [desc_begin, desc_end)
  -- (both NULL when hierarchy is off). Byte order, like dlm_locks.resource.
  -- Deadlock detection reads them to find what blocks another owner's
  -- request.
  ancestors    text[] COLLATE "C" NOT NULL DEFAULT '{}',
  desc_begin   text COLLATE "C",
  desc_end     text COLLATE "C",
  PRIMARY KEY (resource, owner_id)
);
-- Serves the wait-for graph's "what is this owner waiting for" step.
CREATE INDEX dlm_lock_requests_owner_idx ON dlm_lock_requests (owner_id);

-- dlm_acquire: one attempt to take a lock; the whole select-for-update
-- transaction of the hierarchy protocol in one call (one round trip when
-- called in autocommit).
--
-- p_keys: the ancestors' keys root first, then the target LAST; p_crcs: their
-- CRC-32s in the same order. [p_desc_begin, p_desc_end): the target's
-- descendants (both NULL when hierarchy is off). The lease is p_ttl_ms long,
-- measured by the server clock.
--
-- Returns one row: acquired with the new fencing token and the lease in epoch
-- milliseconds, or not acquired with blocked_by = the key whose live holder
-- is in the way (the target, an ancestor or a descendant). Calling it again
-- with the token that holds the row changes nothing and answers acquired, so
-- a retry after a lost reply is safe.
CREATE FUNCTION dlm_acquire(
    p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text,
    p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint)
  RETURNS TABLE (acquired boolean, fencing_token bigint, acquired_at_ms bigint,
                 expires_at_ms bigint, blocked_by text)
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
#variable_conflict use_column
DECLARE
  v_depth     integer := coalesce(cardinality(p_keys), 0);
  v_target    text;
  v_ancestors text[];
  v_count     integer;
  v_row       dlm_locks%ROWTYPE;
  v_blocker   text;
  v_now       timestamptz;
BEGIN
  IF v_depth = 0 OR cardinality(p_crcs) IS DISTINCT FROM v_depth
     OR p_token IS NULL OR p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
    RAISE EXCEPTION 'dlm_acquire: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  v_target := p_keys[v_depth];
  v_ancestors := p_keys[1:v_depth - 1];
  -- Durable even where the session or server default is synchronous_commit =
  -- off: an acquire lost in a crash could let two holders in.
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;

  -- Intention locks: FOR SHARE on every ancestor, root first (in C collation
  -- a prefix sorts before its extensions, so ORDER BY resource is root first
  -- and every acquirer locks a path in the same order). Siblings share these
  -- locks and do not serialise; an acquirer of an ancestor itself needs FOR
  -- UPDATE and waits for us.
  IF v_depth > 1 THEN
    PERFORM 1 FROM dlm_locks l
      WHERE l.resource = ANY (v_ancestors) ORDER BY l.resource FOR SHARE OF l;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count < v_depth - 1 THEN
      -- First use of some ancestor: create the missing rows (in key order,
      -- like the locks), then lock the whole path again; ON CONFLICT waits
      -- for a concurrent creator and keeps its row.
      INSERT INTO dlm_locks (resource, resource_crc)
        SELECT u.k, u.c FROM unnest(v_ancestors, p_crcs[1:v_depth - 1]) AS u (k, c)
        ORDER BY u.k
        ON CONFLICT (resource) DO NOTHING;
      PERFORM 1 FROM dlm_locks l
        WHERE l.resource = ANY (v_ancestors) ORDER BY l.resource FOR SHARE OF l;
    END IF;
  END IF;

  -- The target itself, exclusively. Waiting here also waits out any acquirer
  -- of a descendant, which holds this row FOR SHARE until it commits.
  SELECT * INTO v_row FROM dlm_locks l WHERE l.resource = v_target FOR UPDATE OF l;
  IF NOT FOUND THEN
    INSERT INTO dlm_locks (resource, resource_crc)
      VALUES (v_target, p_crcs[v_depth])
      ON CONFLICT (resource) DO NOTHING;
    SELECT * INTO v_row FROM dlm_locks l WHERE l.resource = v_target FOR UPDATE OF l;
  END IF;

  -- From here on every check is its own statement: under READ COMMITTED each
  -- takes a new snapshot and sees what committed while we waited for the row
  -- locks above (one big statement would judge by its starting snapshot).
  -- The FOR UPDATE above already returned the newest version of the target.

  -- Already ours (a retry after a lost reply): answer as the first time.
  IF v_row.status = 'HELD' AND v_row.token = p_token THEN
    RETURN QUERY SELECT true, v_row.fencing_token,
      floor(extract(epoch FROM v_row.acquired_at) * 1000)::bigint,
      floor(extract(epoch FROM v_row.expires_at) * 1000)::bigint, NULL::text;
    RETURN;
  END IF;

  -- Held by someone else and not yet expired.
  IF v_row.status = 'HELD' AND v_row.expires_at > clock_timestamp() THEN
    v_blocker := v_target;
  END IF;

  -- A live lock on an ancestor covers the target.
  IF v_blocker IS NULL AND v_depth > 1 THEN
    SELECT l.resource INTO v_blocker FROM dlm_locks l
      WHERE l.resource = ANY (v_ancestors)
        AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
      ORDER BY l.resource LIMIT 1;
  END IF;

  -- A live lock on a descendant is covered by the target: range scan on the
  -- primary key.
  IF v_blocker IS NULL AND p_desc_begin IS NOT NULL THEN
    SELECT l.resource INTO v_blocker FROM dlm_locks l
      WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
        AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
      ORDER BY l.resource LIMIT 1;
  END IF;

  -- Refused. The row locks taken above gave this transaction an id, so its
  -- commit would wait for a WAL flush although it changed nothing a crash
  -- could lose: commit it lazily, or every poll of a waiter costs an fsync.
  IF v_blocker IS NOT NULL THEN
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY SELECT false, NULL::bigint, NULL::bigint, NULL::bigint, v_blocker;
    RETURN;
  END IF;

  -- Take it. One clock reading so that expires_at = acquired_at + ttl exactly.
  v_now := clock_timestamp();
  UPDATE dlm_locks l
     SET status = 'HELD', owner_id = p_owner, token = p_token,
         fencing_token = l.fencing_token + 1, acquired_at = v_now,
         ttl_ms = p_ttl_ms, expires_at = v_now + p_ttl_ms * interval '1 millisecond',
         holder_host = p_host, holder_pid = p_pid, holder_ip = inet_client_addr()
   WHERE l.resource = v_target
  RETURNING l.* INTO v_row;
  RETURN QUERY SELECT true, v_row.fencing_token,
    floor(extract(epoch FROM v_row.acquired_at) * 1000)::bigint,
    floor(extract(epoch FROM v_row.expires_at) * 1000)::bigint, NULL::text;
END
$$;

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

-- dlm_extend: moves the lease end to now + p_ttl_ms if p_token still holds
-- the row (status HELD, expired but not taken included). Returns the new
-- expires_at in epoch milliseconds, or NULL when the lock was lost (released,
-- force-released or taken by another acquisition). Durable commit: a lost
-- extension would shorten a lease its holder relies on.
CREATE FUNCTION dlm_extend(p_key text, p_token text, p_ttl_ms bigint)
  RETURNS bigint
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
DECLARE
  v_expires timestamptz;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
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

-- dlm_force_release: operator override, frees the row whoever holds it. True
-- if it was HELD (expired or not). The holder's token stays on the row, so
-- its later extend finds the lock lost. Wakes the waiters like dlm_release;
-- it knows only the key, so it finds them by the requests' own hierarchy
-- columns (a scan of the small request table; an operator action, rare).
CREATE FUNCTION dlm_force_release(p_key text)
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

-- The library's role: no LOGIN, no DDL; an application login role gets it
-- with GRANT dlm_client TO app. Roles are cluster-wide: another schema (or a
-- concurrent migration) may have created it already.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dlm_client') THEN
    BEGIN
      CREATE ROLE dlm_client NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      -- Lost the race to a concurrent creator: the role exists, as wanted.
      NULL;
    END;
  END IF;
END
$$;

-- The schema is chosen by search_path, so its name is only known here.
DO $$
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO dlm_client', current_schema());
END
$$;
-- initialize() reads the version; only migrations (run by a DBA) write it.
GRANT SELECT ON dlm_schema_version TO dlm_client;
-- The functions run with the caller's rights (SECURITY INVOKER), so the role
-- needs the row rights they use; SELECT ... FOR SHARE/UPDATE needs UPDATE,
-- and LOCK TABLE ... SHARE ROW EXCLUSIVE (dlm_register_wait) UPDATE or DELETE.
GRANT SELECT, INSERT, UPDATE, DELETE ON dlm_locks, dlm_lock_requests TO dlm_client;
GRANT EXECUTE ON FUNCTION
  dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint),
  dlm_extend(text, text, bigint),
  dlm_force_release(text),
  dlm_notify_waiters(text, text[], text, text),
  dlm_release(text, text, text[], text, text),
  dlm_release_within(text, text, text[], text, text),
  dlm_register_wait(text, text[], text, text, text, bigint),
  dlm_unregister_wait(text, text)
  TO dlm_client;

INSERT INTO dlm_schema_version (version, description)
  VALUES (1, 'create lock tables'), (2, 'wait graph and release notify');

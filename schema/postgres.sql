-- dlm: the whole current PostgreSQL schema, for a fresh database.
--
-- It is what applying migrations/postgres/V1.. in order gives (today: V1
-- only); a test (tests/postgres) checks that both produce the same catalog.
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

-- dlm_release: frees the row if p_token still holds it (expired but not taken
-- included). True when freed, or already freed by this same token (a retried
-- release); false when another acquisition took the row since.
--
-- Lazy release: the transaction commits with synchronous_commit = off (local
-- to this transaction only), so a release does not wait for a WAL flush. A
-- release lost in a server crash leaves the lock HELD until its expires_at,
-- which is safe: nobody else held it in between. Acquires keep the durable
-- default, because a lost acquire could let two holders in.
CREATE FUNCTION dlm_release(p_key text, p_token text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE dlm_locks SET status = 'FREE'
   WHERE resource = p_key AND token = p_token;
  RETURN FOUND;
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
-- its later extend finds the lock lost.
CREATE FUNCTION dlm_force_release(p_key text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
BEGIN
  UPDATE dlm_locks SET status = 'FREE'
   WHERE resource = p_key AND status = 'HELD';
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
-- needs the row rights they use; SELECT ... FOR SHARE/UPDATE needs UPDATE.
GRANT SELECT, INSERT, UPDATE, DELETE ON dlm_locks, dlm_lock_requests TO dlm_client;
GRANT EXECUTE ON FUNCTION
  dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint),
  dlm_release(text, text),
  dlm_extend(text, text, bigint),
  dlm_force_release(text)
  TO dlm_client;

INSERT INTO dlm_schema_version (version, description)
  VALUES (1, 'create lock tables');

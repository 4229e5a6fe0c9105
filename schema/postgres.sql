-- dlm: the whole current PostgreSQL schema, for a fresh database.
--
-- It is what applying migrations/postgres/V1.. in order gives (today: V1 to
-- V5); a test (tests/postgres) checks that both produce the same catalog.
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
-- applying it owns the tables and functions; it needs CREATE on the schema,
-- and CREATEROLE when the roles below do not exist yet.
--
-- Roles: the application's role (default dlm_client) and an admin role
-- (default dlm_admin), named by custom settings when applying:
--
--   PGOPTIONS='-c dlm.client_role=orders_locks -c dlm.admin_role=orders_dlm_admin' psql ...
--
-- Both are created NOLOGIN when missing and recorded in dlm_config. Give
-- them to login roles (GRANT dlm_client TO app_login; GRANT dlm_admin TO
-- ops_login). The client role has no privilege on any table: it EXECUTEs the
-- SECURITY DEFINER dlm_* functions (pinned search_path), which never return
-- another holder's token. The admin role also force-releases and purges.
--
-- `dlmctl migrate` (or the builder's applyMigrations opt-in) applies the
-- migration files from code, each in one transaction.

-- Which migrations have been applied: initialize() reads it (through
-- dlm_schema_versions()) and refuses a schema that does not serve it.
CREATE TABLE dlm_schema_version (
  -- n of migrations/postgres/V<n>__*.sql.
  version     integer PRIMARY KEY,
  -- The file's <what> part, for humans.
  description text NOT NULL,
  -- When it was applied (server clock).
  applied_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  -- CRC-32 of the file's text as dlm's applier ran it; NULL when applied by
  -- hand (as this file is).
  checksum    bigint,
  -- The oldest library schema version this database still serves.
  compatible_from integer
);

-- One row per resource locked. A release sets status back to FREE and never
-- deletes the row; dlm_purge deletes rows idle for long, and the fencing
-- floor keeps fencing_token growing across that too.
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
  resource_crc  bigint NOT NULL,
  -- HELD while a lease is on the row (expired ones included: expiry is judged
  -- against expires_at, not by a status change).
  status        text NOT NULL DEFAULT 'FREE',
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
  holder_ip     inet
  -- Rules the dlm functions keep (no CHECK constraint: re-built on every
  -- UPDATE, they cost a tenth of an acquire+release; only the schema owner
  -- can write the table, through the functions): status is FREE or HELD; a
  -- HELD row has a token and an expires_at.
) WITH (fillfactor = 80, vacuum_truncate = off,
       toast.vacuum_truncate = off);

-- Storage (both tables): autovacuum truncating the end of a table that
-- shrank takes an ACCESS EXCLUSIVE lock, which stalled every release for
-- about a second; vacuum_truncate = off keeps the pages instead.

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
) WITH (fillfactor = 80, vacuum_truncate = off,
       toast.vacuum_truncate = off);
-- Serves the wait-for graph's "what is this owner waiting for" step.
CREATE INDEX dlm_lock_requests_owner_idx ON dlm_lock_requests (owner_id);

-- Settings recorded when the schema was created (the role names).
CREATE TABLE dlm_config (
  name  text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);

-- The fencing high-water mark: one row.
CREATE TABLE dlm_fencing_floor (
  id          boolean PRIMARY KEY DEFAULT true CHECK (id),
  floor_token bigint NOT NULL DEFAULT 0 CHECK (floor_token >= 0)
);
INSERT INTO dlm_fencing_floor (id, floor_token) VALUES (true, 0);

-- ---------------------------------------------------------- role names

INSERT INTO dlm_config (name, value)
  VALUES ('client_role', coalesce(nullif(current_setting('dlm.client_role', true), ''), 'dlm_client')),
         ('admin_role', coalesce(nullif(current_setting('dlm.admin_role', true), ''), 'dlm_admin'))
  ON CONFLICT (name) DO NOTHING;

-- Roles are cluster-wide: another schema (or a concurrent migration) may have
-- created them already.
DO $$
DECLARE
  v_role text;
BEGIN
  IF (SELECT value FROM dlm_config WHERE name = 'client_role')
     = (SELECT value FROM dlm_config WHERE name = 'admin_role') THEN
    RAISE EXCEPTION 'dlm: the client and admin roles must differ';
  END IF;
  FOR v_role IN SELECT value FROM dlm_config
                 WHERE name IN ('client_role', 'admin_role') ORDER BY name DESC
  LOOP
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_role) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
      EXCEPTION WHEN duplicate_object OR unique_violation THEN
        -- Lost the race to a concurrent creator: the role exists, as wanted.
        NULL;
      END;
    END IF;
  END LOOP;
END
$$;

-- ----------------------------------------------------------- functions
--
-- Each is created with the harmless search_path pg_catalog, pg_temp (no dlm
-- table resolves, so a call fails) and pinned to this schema further down,
-- in a DO block, because the schema's name is only known when applying.

-- dlm_try_acquire: one attempt to take a lock in either mode (p_shared);
-- the whole select-for-update transaction of the hierarchy protocol in one
-- call (one round trip when called in autocommit).
--
-- p_keys: the ancestors' keys root first, then the target LAST; p_crcs: their
-- CRC-32s in the same order. [p_desc_begin, p_desc_end): the target's
-- descendants (both NULL when hierarchy is off). The lease is p_ttl_ms long,
-- measured by the server clock.
--
-- Answers in OUT parameters (one row): acquired with the new fencing token
-- and the lease in epoch milliseconds, or not acquired with blocked_by = the
-- key whose live holder is in the way (the target, an ancestor or a
-- descendant), and queued when that is an earlier waiter's request (fair
-- queueing). Calling it again with the token that holds the row changes
-- nothing and answers acquired, so a retry after a lost reply is safe.
--
-- Purge-safe (V3). dlm_purge may delete an idle row at any moment it is not
-- row-locked, so "make sure the rows exist, then lock them" is a loop: a row
-- that INSERT ... ON CONFLICT DO NOTHING found (and left alone, without a
-- lock) may be deleted by a purge that commits before the locking SELECT
-- runs; and a locking SELECT that waited for a purge's row lock skips the
-- row the purge then deleted (READ COMMITTED re-checks the newest version
-- after the wait, and a deleted row has none). Either way the SELECT comes
-- back short and we insert again. A row we inserted ourselves is invisible
-- to a purge until we commit, so the next SELECT finds it: the loop ends
-- after at most one extra turn per purge that overtook us (bounded below).
-- Once locked, a row cannot be purged (dlm_purge skips locked rows).
--
-- Fencing across a purge: a purge raises dlm_fencing_floor to the largest
-- token it deletes, in the same transaction as the delete. When we find a
-- key's row missing, the purge that deleted it has committed (our INSERT
-- waited for it if it was still in progress), so the UPDATE below, a later
-- statement with a newer snapshot, sees the raised floor: the new token
-- greatest(row token, floor) + 1 is above every token issued for the key.
--
-- Fast path (V6): an EXCLUSIVE attempt on a free or expired key is granted
-- by one UPDATE whose WHERE clause holds every other check; it runs after
-- the row locks like the separate checks did (see V6's header for why that
-- is safe). Otherwise the checks run one statement each, naming the blocker.
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

-- dlm_acquire (9 arguments, V3's, what the previous release calls): an
-- EXCLUSIVE attempt through the 10-argument form, so it respects shared
-- holds and the queue. Same result columns as before.
CREATE OR REPLACE FUNCTION dlm_acquire(
    p_keys text[], p_crcs bigint[], p_desc_begin text, p_desc_end text,
    p_owner text, p_token text, p_ttl_ms bigint, p_host text, p_pid bigint)
  RETURNS TABLE (acquired boolean, fencing_token bigint, acquired_at_ms bigint,
                 expires_at_ms bigint, blocked_by text)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
    SELECT a.acquired, a.fencing_token, a.acquired_at_ms, a.expires_at_ms,
           a.blocked_by
      FROM dlm_acquire(p_keys, p_crcs, p_desc_begin, p_desc_end, p_owner,
                       p_token, p_ttl_ms, p_host, p_pid, false) a;
END
$$;

-- dlm_notify_waiters: NOTIFY dlm_release, payload p_key, when an unexpired
-- request row waits for p_key, one of its ancestors (p_ancestors) or a key in
-- its descendant range: exactly the waiters whose acquire the freed row may
-- have blocked. Nobody waiting, no NOTIFY: a NOTIFY makes the commit take a
-- database-wide lock on the notification queue, which would serialise every
-- release. Each test is a lookup or range scan on the primary key of
-- dlm_lock_requests. The notification is sent when the calling transaction
-- commits, and not at all if it rolls back. Internal: called by the release
-- functions (as the schema owner); no role has EXECUTE on it.
CREATE OR REPLACE FUNCTION dlm_notify_waiters(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
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

-- dlm_extend: moves the lease end to now + p_ttl_ms if p_token still holds
-- the row (status HELD, expired but not taken included). Returns the new
-- expires_at in epoch milliseconds, or NULL when the lock was lost (released,
-- force-released, taken by another acquisition, or purged). Durable commit:
-- a lost extension would shorten a lease its holder relies on.
CREATE OR REPLACE FUNCTION dlm_extend(p_key text, p_token text, p_ttl_ms bigint)
  RETURNS bigint
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
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

-- dlm_force_release: operator override (admin role only), frees the row
-- whoever holds it. True if it was HELD (expired or not). The holder's token
-- stays on the row, so its later extend finds the lock lost. Wakes the
-- waiters like dlm_release; it knows only the key, so it finds them by the
-- requests' own hierarchy columns (a scan of the small request table; an
-- operator action, rare).
-- dlm_force_release (admin): frees the key whoever holds it, in both modes
-- (the EXCLUSIVE row and every SHARED hold). True if anything was held.
CREATE OR REPLACE FUNCTION dlm_force_release(p_key text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
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
  IF NOT v_freed THEN
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
-- each other or need a key scheme), runs with the owner's rights like the
-- rest of the function (no role needs a privilege on the table),
-- shows up in pg_locks under the table's name, and ends with the
-- transaction. Each statement after it takes a new snapshot (READ
-- COMMITTED), so it sees every registration committed before it got the lock.
--
-- Lazy commit: a request row lost in a crash only costs a deadlock going
-- undetected until the waiters' timeouts, which is what happens without it.
-- dlm_register_wait (7 arguments): as V3's, for a request of either mode,
-- with the edges of dlm_wait_blockers (mode-aware holds and the queue).
-- The request's age for its own queue edges: its existing row's
-- requested_at when it re-registers, else now.
CREATE OR REPLACE FUNCTION dlm_register_wait(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_owner text, p_max_wait_ms bigint, p_shared boolean)
  RETURNS text[]
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_now    timestamptz;
  v_my_at  timestamptz;
  v_owners text[] := '{}';
  v_parent integer[] := '{}';
  v_via    text[] := '{}';
  v_next   integer := 1;
  v_at     integer;
  v_cycle  text[];
  v_hop    record;
BEGIN
  IF p_key IS NULL OR p_owner IS NULL OR p_max_wait_ms IS NULL
     OR p_max_wait_ms < 0 OR p_shared IS NULL THEN
    RAISE EXCEPTION 'dlm_register_wait: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Serialised with every other registration (see V3).
  LOCK TABLE dlm_lock_requests IN SHARE ROW EXCLUSIVE MODE;
  PERFORM set_config('synchronous_commit', 'off', true);
  v_now := clock_timestamp();
  DELETE FROM dlm_lock_requests r WHERE r.expires_at <= v_now;
  SELECT r.requested_at INTO v_my_at FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = p_owner;
  v_my_at := coalesce(v_my_at, v_now);

  FOR v_hop IN
    SELECT DISTINCT b.owner_id
      FROM dlm_wait_blockers(p_key, p_ancestors, p_desc_begin, p_desc_end,
                             p_shared, v_my_at, p_owner, v_now) b
     ORDER BY b.owner_id
  LOOP
    -- The caller holds what blocks its own request: a cycle of one.
    IF v_hop.owner_id = p_owner THEN
      RETURN ARRAY[p_key];
    END IF;
    v_owners := v_owners || v_hop.owner_id;
    v_parent := v_parent || 0;
    v_via := v_via || p_key;
  END LOOP;

  WHILE v_next <= cardinality(v_owners) LOOP
    FOR v_hop IN
      SELECT r.resource, b.owner_id
        FROM dlm_lock_requests r
        CROSS JOIN LATERAL dlm_wait_blockers(
          r.resource, r.ancestors, r.desc_begin, r.desc_end,
          r.mode = 'SHARED', r.requested_at, r.owner_id, v_now) b
       WHERE r.owner_id = v_owners[v_next] AND r.expires_at > v_now
       ORDER BY r.resource, b.owner_id
    LOOP
      IF v_hop.owner_id = p_owner THEN
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

  INSERT INTO dlm_lock_requests AS r
      (resource, owner_id, requested_at, expires_at, ancestors, desc_begin,
       desc_end, mode)
    VALUES (p_key, p_owner, v_now,
            v_now + p_max_wait_ms * interval '1 millisecond',
            coalesce(p_ancestors, '{}'), p_desc_begin, p_desc_end,
            CASE WHEN p_shared THEN 'SHARED' ELSE 'EXCLUSIVE' END)
    ON CONFLICT (resource, owner_id) DO UPDATE
      SET expires_at = excluded.expires_at, ancestors = excluded.ancestors,
          desc_begin = excluded.desc_begin, desc_end = excluded.desc_end,
          mode = excluded.mode;
  RETURN '{}'::text[];
END
$$;

-- dlm_register_wait (6 arguments, V3's): an EXCLUSIVE request.
CREATE OR REPLACE FUNCTION dlm_register_wait(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_owner text, p_max_wait_ms bigint)
  RETURNS text[]
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN dlm_register_wait(p_key, p_ancestors, p_desc_begin, p_desc_end,
                           p_owner, p_max_wait_ms, false);
END
$$;

-- dlm_unregister_wait: deletes p_owner's request row for p_key. True if there
-- was one. Lazy commit, like the registration: a lost delete leaves a row
-- that expires.
-- dlm_unregister_wait: deletes p_owner's request row for p_key; true if
-- there was one. Now also wakes the waiters that request may have held back
-- (fair queueing): a NOTIFY when other live requests wait on the key, an
-- ancestor or a descendant of it. Lazy commit.
CREATE OR REPLACE FUNCTION dlm_unregister_wait(p_key text, p_owner text)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_row record;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = p_owner
  RETURNING r.ancestors, r.desc_begin, r.desc_end INTO v_row;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM dlm_notify_waiters(p_key, v_row.ancestors, v_row.desc_begin,
                             v_row.desc_end);
  RETURN true;
END
$$;

-- dlm_prefix_end: the smallest string above every string that starts with
-- p_prefix, for a primary-key range scan [p_prefix, end); NULL when there is
-- none that is easy to write (empty prefix, or only non-ASCII characters):
-- the scan then has no upper bound. Trailing characters from 0x7F up are
-- dropped first, so the incremented character is ASCII, valid in every
-- server encoding. Internal (no role has EXECUTE on it).
CREATE OR REPLACE FUNCTION dlm_prefix_end(p_prefix text)
  RETURNS text
  LANGUAGE plpgsql IMMUTABLE STRICT SECURITY INVOKER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_stem text := p_prefix;
BEGIN
  WHILE v_stem <> '' AND ascii(right(v_stem, 1)) >= 127 LOOP
    v_stem := left(v_stem, -1);
  END LOOP;
  IF v_stem = '' THEN
    RETURN NULL;
  END IF;
  RETURN left(v_stem, -1) || chr(ascii(right(v_stem, 1)) + 1);
END
$$;

-- dlm_describe: the row of p_key for operators, or no row when the key was
-- never acquired (intention-only rows, fencing_token 0, count as never
-- locked). No token: a caller must not be able to release someone else's
-- lock with what it read. Times in epoch milliseconds by the server clock.
CREATE OR REPLACE FUNCTION dlm_describe(p_key text)
  RETURNS TABLE (resource text, status_held boolean, held boolean,
                 owner_id text, fencing_token bigint, acquired_at_ms bigint,
                 expires_at_ms bigint, ttl_ms bigint, holder_host text,
                 holder_pid bigint, holder_ip text)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
    SELECT l.resource::text, l.status = 'HELD',
           l.status = 'HELD' AND l.expires_at > clock_timestamp(), l.owner_id,
           l.fencing_token,
           floor(extract(epoch FROM l.acquired_at) * 1000)::bigint,
           floor(extract(epoch FROM l.expires_at) * 1000)::bigint, l.ttl_ms,
           l.holder_host, l.holder_pid, host(l.holder_ip)
      FROM dlm_locks l
     WHERE l.resource = p_key AND l.fencing_token > 0;
END
$$;

-- dlm_list_held: rows with status HELD (expired ones included; held tells)
-- whose key starts with p_prefix ('' for all), in key order, columns as
-- dlm_describe. A range scan on the primary key, then the exact prefix test.
CREATE OR REPLACE FUNCTION dlm_list_held(p_prefix text)
  RETURNS TABLE (resource text, status_held boolean, held boolean,
                 owner_id text, fencing_token bigint, acquired_at_ms bigint,
                 expires_at_ms bigint, ttl_ms bigint, holder_host text,
                 holder_pid bigint, holder_ip text)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
         AND l.resource < v_end AND starts_with(l.resource, v_prefix)
       ORDER BY l.resource;
  END IF;
END
$$;

-- dlm_list_waiters: live request rows (deadline not passed) whose key starts
-- with p_prefix ('' for all), in key order, then oldest first. A range scan
-- on the primary key (resource is its first column).
CREATE OR REPLACE FUNCTION dlm_list_waiters(p_prefix text)
  RETURNS TABLE (resource text, owner_id text, requested_at_ms bigint,
                 expires_at_ms bigint)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
         AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  ELSE
    RETURN QUERY
      SELECT r.resource::text, r.owner_id,
             floor(extract(epoch FROM r.requested_at) * 1000)::bigint,
             floor(extract(epoch FROM r.expires_at) * 1000)::bigint
        FROM dlm_lock_requests r
       WHERE r.expires_at > clock_timestamp() AND r.resource >= v_prefix
         AND r.resource < v_end AND starts_with(r.resource, v_prefix)
       ORDER BY r.resource, r.requested_at, r.owner_id;
  END IF;
END
$$;

-- dlm_schema_versions: every row of dlm_schema_version, in version order,
-- applied_at as UTC ISO-8601 text with milliseconds (independent of the
-- session's TimeZone and DateStyle). What initialize() checks and `dlmctl
-- schema status` shows.
CREATE OR REPLACE FUNCTION dlm_schema_versions()
  RETURNS TABLE (version integer, description text, applied_at text,
                 checksum bigint, compatible_from integer)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
    SELECT v.version, v.description,
           to_char(v.applied_at AT TIME ZONE 'UTC',
                   'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           v.checksum, v.compatible_from
      FROM dlm_schema_version v
     ORDER BY v.version;
END
$$;

-- dlm_purge (admin role only): deletes up to p_batch rows of dlm_locks that
-- have been idle for p_idle_for_ms: FREE or HELD-but-expired with expires_at
-- before now - p_idle_for_ms (a release leaves expires_at at the lease end,
-- so a FREE row has been free at least that long), or never acquired
-- (intention-only rows, no expires_at); and that no live request row waits
-- for. Rows another transaction has locked (an acquire in progress, an
-- intention lock of a descendant's acquirer) are skipped, not waited for
-- (SKIP LOCKED), so a purge never holds up an acquire for longer than its
-- own short transaction, and never waits for one.
--
-- Before deleting, in the same transaction, it raises dlm_fencing_floor to
-- the largest fencing token among the rows it deletes: dlm_acquire continues
-- every re-created row above the floor, so no key sees a token twice.
-- Concurrent purges serialise on the floor row only.
--
-- Returns the rows deleted (p_dry_run: that would be, up to p_batch; nothing
-- is locked or deleted) and the floor afterwards. Callers loop until fewer
-- than p_batch rows come back. A holder whose lease ended long ago finds its
-- row gone: its release answers false and its extend NULL.
-- dlm_purge (admin): as V3's, and first deletes SHARED holds whose lease
-- ended at least p_idle_for_ms ago (holders that never released; a
-- holder's token is never above its key row's counter, so the floor rule is
-- unchanged); a row with any SHARED hold left is not idle. Rows counts both.
CREATE OR REPLACE FUNCTION dlm_purge(
    p_idle_for_ms bigint, p_batch integer, p_dry_run boolean)
  RETURNS TABLE (rows bigint, fencing_floor bigint)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_cutoff timestamptz;
  v_keys   text[];
  v_max    bigint;
  v_rows   bigint := 0;
  v_holds  bigint := 0;
  v_floor  bigint;
BEGIN
  IF p_idle_for_ms IS NULL OR p_idle_for_ms < 0 OR p_batch IS NULL
     OR p_batch <= 0 THEN
    RAISE EXCEPTION 'dlm_purge: bad arguments'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  v_cutoff := clock_timestamp() - p_idle_for_ms * interval '1 millisecond';

  IF coalesce(p_dry_run, false) THEN
    SELECT count(*) INTO v_holds FROM (
      SELECT 1 FROM dlm_shared_holds s WHERE s.expires_at < v_cutoff
       LIMIT p_batch) h;
    SELECT count(*) INTO v_rows FROM (
      SELECT 1 FROM dlm_locks l
       WHERE (l.expires_at IS NULL OR l.expires_at < v_cutoff)
         AND NOT EXISTS (SELECT 1 FROM dlm_lock_requests r
                          WHERE r.resource = l.resource
                            AND r.expires_at > clock_timestamp())
         AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds s
                          WHERE s.resource = l.resource
                            AND s.expires_at >= v_cutoff)
       LIMIT greatest(p_batch - v_holds, 0)) s;
    SELECT f.floor_token INTO v_floor FROM dlm_fencing_floor f WHERE f.id;
    RETURN QUERY SELECT v_holds + v_rows, coalesce(v_floor, 0);
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
     LIMIT p_batch
     FOR UPDATE OF l SKIP LOCKED)
  DELETE FROM dlm_shared_holds s USING stale
   WHERE s.resource = stale.resource AND s.token = stale.token
     AND s.expires_at < v_cutoff;
  GET DIAGNOSTICS v_holds = ROW_COUNT;

  IF v_holds < p_batch THEN
    SELECT array_agg(s.resource), max(s.fencing_token) INTO v_keys, v_max
      FROM (SELECT l.resource, l.fencing_token FROM dlm_locks l
             WHERE (l.expires_at IS NULL OR l.expires_at < v_cutoff)
               AND NOT EXISTS (SELECT 1 FROM dlm_lock_requests r
                                WHERE r.resource = l.resource
                                  AND r.expires_at > clock_timestamp())
               AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds s
                                WHERE s.resource = l.resource)
             LIMIT p_batch - v_holds
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
  RETURN QUERY SELECT v_holds + v_rows, coalesce(v_floor, 0);
END
$$;

-- ---------------------------------------------------------- privileges

-- Nothing for anyone by default (functions are EXECUTE for PUBLIC when
-- created), nothing left of V1's grants to dlm_client; then exactly what
-- each role needs.
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
  -- V1 gave dlm_client USAGE on the schema; it keeps it only if it is still
  -- one of the two roles.
  IF 'dlm_client' NOT IN (v_client, v_admin)
     AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'dlm_client') THEN
    EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM dlm_client', v_schema);
  END IF;

  -- The admin role can do what the client can (list, lock) and more.
  EXECUTE format('GRANT %I TO %I', v_client, v_admin);
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I', v_schema, v_client,
                 v_admin);
  EXECUTE format(
    'GRANT EXECUTE ON FUNCTION '
    '%1$I.dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint), '
    '%1$I.dlm_release(text, text, text[], text, text), '
    '%1$I.dlm_release_within(text, text, text[], text, text), '
    '%1$I.dlm_extend(text, text, bigint), '
    '%1$I.dlm_register_wait(text, text[], text, text, text, bigint), '
    '%1$I.dlm_unregister_wait(text, text), '
    '%1$I.dlm_describe(text), '
    '%1$I.dlm_list_held(text), '
    '%1$I.dlm_list_waiters(text), '
    '%1$I.dlm_schema_versions() '
    'TO %2$I', v_schema, v_client);
  EXECUTE format(
    'GRANT EXECUTE ON FUNCTION '
    '%1$I.dlm_force_release(text), '
    '%1$I.dlm_purge(bigint, integer, boolean) '
    'TO %2$I', v_schema, v_admin);

  -- The pinned search_path names this schema: were the client role able to
  -- create objects in it, it could shadow what the functions call.
  IF has_schema_privilege(v_client, v_schema, 'CREATE') THEN
    RAISE WARNING 'dlm: role % can CREATE in schema %, which the SECURITY DEFINER dlm functions search; revoke it (REVOKE CREATE ON SCHEMA % FROM ...)',
      v_client, v_schema, v_schema;
  END IF;
END
$$;

-- ------------------------------------------------------------ comments
-- The catalog is the documentation: \d+ and \df+ in psql show these.
COMMENT ON TABLE dlm_schema_version IS
  'dlm: one row per applied migration (migrations/postgres/V<n>__*.sql).';
COMMENT ON COLUMN dlm_schema_version.version IS
  'n of V<n>__*.sql.';
COMMENT ON COLUMN dlm_schema_version.description IS
  'The file''s <what> part, for humans.';
COMMENT ON COLUMN dlm_schema_version.applied_at IS
  'When it was applied (server clock).';
COMMENT ON COLUMN dlm_schema_version.checksum IS
  'CRC-32 of the file''s text as dlm''s applier ran it (dlmctl migrate); NULL when applied by hand.';
COMMENT ON COLUMN dlm_schema_version.compatible_from IS
  'Oldest library schema version this database still serves (rolling upgrades); NULL before version 3.';

COMMENT ON TABLE dlm_locks IS
  'dlm: one row per lockable resource; changed only by the dlm_* functions. Idle rows are removed by dlm_purge.';
COMMENT ON COLUMN dlm_locks.resource IS
  'Full scoped key (DC#farm#client#a.b.c), byte order (COLLATE "C").';
COMMENT ON COLUMN dlm_locks.resource_crc IS
  'CRC-32 of resource, computed by the client.';
COMMENT ON COLUMN dlm_locks.status IS
  'HELD while a lease is on the row (expired ones included), else FREE.';
COMMENT ON COLUMN dlm_locks.owner_id IS
  'Owner GUID of the current (or last) holder.';
COMMENT ON COLUMN dlm_locks.token IS
  'Secret per-acquisition token; release and extend are conditional on it. Never shown by the listing functions.';
COMMENT ON COLUMN dlm_locks.fencing_token IS
  'Grows with every acquisition of the key, also across purges (see dlm_fencing_floor); 0 = never acquired.';
COMMENT ON COLUMN dlm_locks.acquired_at IS
  'Server clock at acquisition.';
COMMENT ON COLUMN dlm_locks.ttl_ms IS
  'Lease length last asked for, in milliseconds.';
COMMENT ON COLUMN dlm_locks.expires_at IS
  'End of the lease; a HELD row past it can be taken by anyone.';
COMMENT ON COLUMN dlm_locks.holder_host IS
  'Host name the holder sent.';
COMMENT ON COLUMN dlm_locks.holder_pid IS
  'Process id the holder sent.';
COMMENT ON COLUMN dlm_locks.holder_ip IS
  'Holder''s address as the server saw it (NULL over a unix socket).';

COMMENT ON TABLE dlm_lock_requests IS
  'dlm: one row per owner waiting in acquireLock, for deadlock detection and wake-ups.';
COMMENT ON COLUMN dlm_lock_requests.resource IS
  'Scoped key waited for.';
COMMENT ON COLUMN dlm_lock_requests.owner_id IS
  'Waiting owner GUID.';
COMMENT ON COLUMN dlm_lock_requests.requested_at IS
  'When the wait began (server clock).';
COMMENT ON COLUMN dlm_lock_requests.expires_at IS
  'Waiter''s deadline; the row no longer counts after it.';
COMMENT ON COLUMN dlm_lock_requests.ancestors IS
  'Scoped keys of the waited key''s ancestors, root first.';
COMMENT ON COLUMN dlm_lock_requests.desc_begin IS
  'Start of the waited key''s descendant range (NULL: hierarchy off).';
COMMENT ON COLUMN dlm_lock_requests.desc_end IS
  'End (exclusive) of the waited key''s descendant range.';

COMMENT ON TABLE dlm_config IS
  'dlm: settings recorded when migration V3 was first applied.';
COMMENT ON COLUMN dlm_config.name IS
  'client_role or admin_role.';
COMMENT ON COLUMN dlm_config.value IS
  'The role name later migrations grant to.';

COMMENT ON TABLE dlm_fencing_floor IS
  'dlm: one row, the fencing high-water mark kept across purges.';
COMMENT ON COLUMN dlm_fencing_floor.id IS
  'Always true: the table has one row.';
COMMENT ON COLUMN dlm_fencing_floor.floor_token IS
  'Largest fencing token of any purged row; every (re-)created row continues above it.';

COMMENT ON FUNCTION dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint) IS
  'dlm (client): one attempt to take a lock, hierarchy protocol, one transaction.';
COMMENT ON FUNCTION dlm_notify_waiters(text, text[], text, text) IS
  'dlm (internal): NOTIFY dlm_release when a live request waits for the freed key.';
COMMENT ON FUNCTION dlm_release(text, text, text[], text, text) IS
  'dlm (client): token-conditional release, lazily committed; wakes waiters.';
COMMENT ON FUNCTION dlm_release_within(text, text, text[], text, text) IS
  'dlm (client): token-conditional release inside the caller''s transaction (commitLock); DLM01 when lost.';
COMMENT ON FUNCTION dlm_extend(text, text, bigint) IS
  'dlm (client): token-conditional lease extension; NULL when the lock was lost.';
COMMENT ON FUNCTION dlm_force_release(text) IS
  'dlm (admin): frees a lock whoever holds it.';
COMMENT ON FUNCTION dlm_register_wait(text, text[], text, text, text, bigint) IS
  'dlm (client): records a waiter unless waiting would close a cycle (returned).';
COMMENT ON FUNCTION dlm_unregister_wait(text, text) IS
  'dlm (client): removes a waiter''s request row.';
COMMENT ON FUNCTION dlm_prefix_end(text) IS
  'dlm (internal): upper bound of a key-prefix range scan.';
COMMENT ON FUNCTION dlm_describe(text) IS
  'dlm (client): one acquired lock row, without its token.';
COMMENT ON FUNCTION dlm_list_held(text) IS
  'dlm (client): HELD rows under a key prefix, without tokens.';
COMMENT ON FUNCTION dlm_list_waiters(text) IS
  'dlm (client): live request rows under a key prefix.';
COMMENT ON FUNCTION dlm_schema_versions() IS
  'dlm (client): the applied migrations, for initialize() and schema status.';
COMMENT ON FUNCTION dlm_purge(bigint, integer, boolean) IS
  'dlm (admin): deletes a batch of idle rows after raising the fencing floor.';

-- ------------------------------------------- shared locks and fair queueing (V5)
-- As migrations/postgres/V5__shared_locks_and_fair_queueing.sql (see its
-- header): a table for SHARED holds, the mode of a request, and the
-- functions new in V5. Those V5 replaced (dlm_acquire, dlm_register_wait,
-- dlm_unregister_wait, dlm_force_release, dlm_purge) stand above in their
-- final form, with the 10- and 7-argument forms beside them.
--
-- V6 (migrations/postgres/V6__faster_acquire_and_release.sql) added
-- dlm_try_acquire, made the 10-argument dlm_acquire its wrapper, rewrote the
-- four release functions and dropped dlm_locks' CHECK constraints; they too
-- stand in their final form in this file.


CREATE TABLE IF NOT EXISTS dlm_shared_holds (
  resource      text COLLATE "C" NOT NULL,
  token         text NOT NULL,
  owner_id      text NOT NULL,
  fencing_token bigint NOT NULL,
  acquired_at   timestamptz NOT NULL,
  ttl_ms        bigint NOT NULL,
  expires_at    timestamptz NOT NULL,
  holder_host   text,
  holder_pid    bigint,
  holder_ip     inet,
  PRIMARY KEY (resource, token)
) WITH (fillfactor = 80, vacuum_truncate = off, toast.vacuum_truncate = off);

ALTER TABLE dlm_lock_requests
  ADD COLUMN IF NOT EXISTS mode text NOT NULL DEFAULT 'EXCLUSIVE';
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_constraint
                  WHERE conname = 'dlm_lock_requests_mode_check'
                    AND conrelid = 'dlm_lock_requests'::regclass) THEN
    ALTER TABLE dlm_lock_requests ADD CONSTRAINT dlm_lock_requests_mode_check
      CHECK (mode IN ('EXCLUSIVE', 'SHARED'));
  END IF;
END
$$;

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

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

-- dlm_extend_shared: moves the SHARED hold's lease end to now + p_ttl_ms.
-- The new expires_at in epoch milliseconds, or NULL when the hold is gone.
-- Durable, like dlm_extend.
CREATE OR REPLACE FUNCTION dlm_extend_shared(
    p_key text, p_token text, p_ttl_ms bigint)
  RETURNS bigint
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_expires timestamptz;
BEGIN
  IF p_ttl_ms IS NULL OR p_ttl_ms <= 0 THEN
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

-- dlm_holders: every hold not released or taken over, of exactly p_key
-- (p_exact) or under the key prefix p_key ('' for all): EXCLUSIVE rows
-- (status HELD) and SHARED holds, in key order, per key the EXCLUSIVE one
-- first and SHARED ones oldest first. No tokens. Times in epoch ms.
CREATE OR REPLACE FUNCTION dlm_holders(p_key text, p_exact boolean)
  RETURNS TABLE (resource text, status_held boolean, held boolean,
                 owner_id text, fencing_token bigint, acquired_at_ms bigint,
                 expires_at_ms bigint, ttl_ms bigint, holder_host text,
                 holder_pid bigint, holder_ip text, shared boolean)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
     ORDER BY h.resource COLLATE "C", h.shared, h.since, h.token_order;
END
$$;

-- dlm_list_requests: live request rows under a key prefix ('' for all) with
-- their mode, in key order, then oldest first (dlm_list_waiters plus the
-- mode, which V3's result type cannot gain).
CREATE OR REPLACE FUNCTION dlm_list_requests(p_prefix text)
  RETURNS TABLE (resource text, owner_id text, requested_at_ms bigint,
                 expires_at_ms bigint, shared boolean)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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
       AND (v_end IS NULL OR r.resource < v_end)
       AND starts_with(r.resource, v_prefix)
     ORDER BY r.resource, r.requested_at, r.owner_id;
END
$$;

-- dlm_wait_blockers (internal): the owners a request waits for in the
-- wait-for graph: owners of live holds that conflict with it (EXCLUSIVE
-- holds always, SHARED holds when the request is EXCLUSIVE) on its key, an
-- ancestor or a descendant, and owners of older live requests (by
-- (requested_at, owner_id)) of other owners on those keys that conflict
-- with it (fair queueing: they go first). Runs as its caller
-- (dlm_register_wait, the schema owner); no role has EXECUTE on it.
CREATE OR REPLACE FUNCTION dlm_wait_blockers(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_shared boolean, p_requested_at timestamptz, p_owner text,
    p_now timestamptz)
  RETURNS TABLE (owner_id text)
  LANGUAGE plpgsql STABLE SECURITY INVOKER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  RETURN QUERY
    SELECT l.owner_id FROM dlm_locks l
     WHERE l.status = 'HELD' AND l.expires_at > p_now
       AND l.owner_id IS NOT NULL
       AND (l.resource = p_key OR l.resource = ANY (p_ancestors)
            OR (l.resource >= p_desc_begin AND l.resource < p_desc_end))
    UNION
    SELECT s.owner_id FROM dlm_shared_holds s
     WHERE NOT p_shared AND s.expires_at > p_now
       AND (s.resource = p_key OR s.resource = ANY (p_ancestors)
            OR (s.resource >= p_desc_begin AND s.resource < p_desc_end))
    UNION
    SELECT r.owner_id FROM dlm_lock_requests r
     WHERE r.owner_id <> p_owner AND r.expires_at > p_now
       AND (NOT p_shared OR r.mode = 'EXCLUSIVE')
       AND (r.requested_at, r.owner_id) < (p_requested_at, p_owner)
       AND (r.resource = p_key OR r.resource = ANY (p_ancestors)
            OR (r.resource >= p_desc_begin AND r.resource < p_desc_end));
END
$$;

-- Pin every function's search_path to this schema, once, after the last one
-- is created: pg_catalog first, so no object of another schema can shadow a
-- built-in, and pg_temp last, so a caller's temporary table cannot capture a
-- dlm table's name. SET search_path FROM CURRENT would keep whatever
-- search_path applied the schema (e.g. "$user", public).
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
-- The new table: nobody but the schema owner (also against default
-- privileges a DBA may have set). New functions: EXECUTE revoked from
-- PUBLIC, then granted as V3 does.
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
    EXECUTE format('REVOKE ALL ON TABLE %I.dlm_shared_holds FROM %s',
                   v_schema, v_grantee);
    EXECUTE format(
      'REVOKE ALL ON FUNCTION '
      '%1$I.dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean), '
      '%1$I.dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean), '
      '%1$I.dlm_release_shared(text, text, text[], text, text), '
      '%1$I.dlm_release_shared_within(text, text, text[], text, text), '
      '%1$I.dlm_extend_shared(text, text, bigint), '
      '%1$I.dlm_holders(text, boolean), '
      '%1$I.dlm_list_requests(text), '
      '%1$I.dlm_wait_blockers(text, text[], text, text, boolean, timestamptz, text, timestamptz), '
      '%1$I.dlm_register_wait(text, text[], text, text, text, bigint, boolean) '
      'FROM %2$s', v_schema, v_grantee);
  END LOOP;
  EXECUTE format(
    'GRANT EXECUTE ON FUNCTION '
    '%1$I.dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean), '
    '%1$I.dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean), '
    '%1$I.dlm_release_shared(text, text, text[], text, text), '
    '%1$I.dlm_release_shared_within(text, text, text[], text, text), '
    '%1$I.dlm_extend_shared(text, text, bigint), '
    '%1$I.dlm_holders(text, boolean), '
    '%1$I.dlm_list_requests(text), '
    '%1$I.dlm_register_wait(text, text[], text, text, text, bigint, boolean) '
    'TO %2$I', v_schema, v_client);
END
$$;

-- ------------------------------------------------------------ comments
COMMENT ON TABLE dlm_shared_holds IS
  'dlm: one row per SHARED hold; changed only by the dlm_* functions.';
COMMENT ON COLUMN dlm_shared_holds.resource IS
  'Scoped key held (its dlm_locks row gives the fencing counter).';
COMMENT ON COLUMN dlm_shared_holds.token IS
  'Secret per-acquisition token; release and extend are conditional on it. Never shown by the listing functions.';
COMMENT ON COLUMN dlm_shared_holds.owner_id IS
  'Owner GUID of the holder.';
COMMENT ON COLUMN dlm_shared_holds.fencing_token IS
  'The key''s fencing token this acquisition took.';
COMMENT ON COLUMN dlm_shared_holds.acquired_at IS
  'Server clock at acquisition.';
COMMENT ON COLUMN dlm_shared_holds.ttl_ms IS
  'Lease length last asked for, in milliseconds.';
COMMENT ON COLUMN dlm_shared_holds.expires_at IS
  'End of the lease; past it the hold no longer blocks anyone and an EXCLUSIVE acquirer takes the key over.';
COMMENT ON COLUMN dlm_shared_holds.holder_host IS
  'Host name the holder sent.';
COMMENT ON COLUMN dlm_shared_holds.holder_pid IS
  'Process id the holder sent.';
COMMENT ON COLUMN dlm_shared_holds.holder_ip IS
  'Holder''s address as the server saw it (NULL over a unix socket).';
COMMENT ON COLUMN dlm_lock_requests.mode IS
  'EXCLUSIVE or SHARED: the mode waited for (which holds and requests conflict).';

COMMENT ON FUNCTION dlm_try_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean) IS
  'dlm (client): one attempt to take a lock in either mode, hierarchy protocol and fair queueing, one transaction; one row of OUT parameters.';
COMMENT ON FUNCTION dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint, boolean) IS
  'dlm (client, schema 5 callers): dlm_try_acquire as a set of one row.';
COMMENT ON FUNCTION dlm_acquire(text[], bigint[], text, text, text, text, bigint, text, bigint) IS
  'dlm (client, schema 4 callers): an EXCLUSIVE dlm_acquire.';
COMMENT ON FUNCTION dlm_release_shared(text, text, text[], text, text) IS
  'dlm (client): token-conditional release of a SHARED hold, lazily committed; wakes waiters.';
COMMENT ON FUNCTION dlm_release_shared_within(text, text, text[], text, text) IS
  'dlm (client): SHARED release inside the caller''s transaction (commitLock); DLM01 when lost.';
COMMENT ON FUNCTION dlm_extend_shared(text, text, bigint) IS
  'dlm (client): token-conditional extension of a SHARED hold; NULL when lost.';
COMMENT ON FUNCTION dlm_holders(text, boolean) IS
  'dlm (client): holds of both modes of a key or under a prefix, without tokens.';
COMMENT ON FUNCTION dlm_list_requests(text) IS
  'dlm (client): live request rows under a key prefix, with their mode.';
COMMENT ON FUNCTION dlm_wait_blockers(text, text[], text, text, boolean, timestamptz, text, timestamptz) IS
  'dlm (internal): the owners a request waits for (holds and older requests).';
COMMENT ON FUNCTION dlm_register_wait(text, text[], text, text, text, bigint, boolean) IS
  'dlm (client): records a waiter of either mode unless waiting would close a cycle (returned).';
COMMENT ON FUNCTION dlm_register_wait(text, text[], text, text, text, bigint) IS
  'dlm (client, schema 4 callers): an EXCLUSIVE dlm_register_wait.';
COMMENT ON FUNCTION dlm_unregister_wait(text, text) IS
  'dlm (client): removes a waiter''s request row and wakes those it held back.';

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (1, 'create lock tables', NULL), (2, 'wait graph and release notify', NULL),
         (3, 'least privilege purge and compatibility', 2),
         (4, 'revoke table rights', 2),
         (5, 'shared locks and fair queueing', 4),
         (6, 'faster acquire and release', 4);

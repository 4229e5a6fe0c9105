-- Migration V4 for SQLite: shared locks and fair queueing (dlm schema
-- version 4): SHARED holds get a table of their own, request rows say which
-- mode their waiter asks for.
--
-- Applied like V1 to V3: in one BEGIN IMMEDIATE transaction together with
-- its dlm_schema_version row; it holds no BEGIN/COMMIT itself. Running it by
-- hand a second time fails at CREATE TABLE ("already exists") and changes
-- nothing.
--
-- Compatibility: compatible_from 4, this file no longer serves libraries
-- built for schema version 3. Such a library decides conflicts in its own
-- statements and knows nothing of dlm_shared_holds: it would grant an
-- EXCLUSIVE lock over live SHARED holders, and an exclusive takeover of its
-- own would leave their rows behind. Stop every process of the older
-- release that uses the file before applying this migration (README "For
-- DBAs").

-- SHARED holds, one row per holder: any number per key at once. The key's
-- EXCLUSIVE state and its fencing counter stay in dlm_locks (every SHARED
-- acquisition also moves the key's counter there); a hold's fencing token is
-- never above its key row's counter, so purging follows the same floor rule.
-- Released holds leave nothing behind: release deletes the row, an EXCLUSIVE
-- takeover deletes the expired ones, SqliteStore::purgeIdle the stale ones.
-- WITHOUT ROWID for the reasons given for dlm_locks: the rows of one key lie
-- together in key order, so the key's holders, the ancestors' and the
-- descendant range are primary-key lookups and range scans.
CREATE TABLE dlm_shared_holds (
  -- The scoped key held, as in dlm_locks.resource (byte order).
  resource       TEXT NOT NULL COLLATE BINARY,
  -- Random per acquisition; release and extend are conditional on it.
  token          TEXT NOT NULL,
  -- The GUID of the owner (thread or task) holding it.
  owner_id       TEXT NOT NULL,
  -- The key's fencing token this acquisition took (from dlm_locks).
  fencing_token  INTEGER NOT NULL,
  -- When the hold was acquired.
  acquired_at_ms INTEGER NOT NULL,
  -- The lease length last asked for (by the acquisition or an extension).
  ttl_ms         INTEGER NOT NULL,
  -- After this instant the hold no longer counts: it may be taken over by an
  -- EXCLUSIVE acquirer (which deletes the row) or purged.
  expires_at_ms  INTEGER NOT NULL,
  -- Who holds it, for operators: host name and process id. holder_ip stays
  -- NULL on SQLite (no network peer; the column matches PostgreSQL's).
  holder_host    TEXT,
  holder_pid     INTEGER,
  holder_ip      TEXT,
  PRIMARY KEY (resource, token)
) WITHOUT ROWID;

-- The mode the waiter asks for; which holds and requests it conflicts with
-- (a request conflicts when either side is EXCLUSIVE). Rows of older
-- libraries were all EXCLUSIVE. ADD COLUMN appends the column after the last
-- one in the table's CREATE text; schema/sqlite.sql declares it there.
ALTER TABLE dlm_lock_requests ADD COLUMN
  mode TEXT NOT NULL DEFAULT 'EXCLUSIVE' CHECK (mode IN ('EXCLUSIVE', 'SHARED'));

INSERT INTO dlm_schema_version (version, description, compatible_from)
VALUES (4, 'shared holds and request modes', 4);

-- Migration V2 for SQLite: request rows carry what deadlock detection needs
-- (dlm schema version 2).
--
-- Applied like V1: in one BEGIN IMMEDIATE transaction together with its
-- dlm_schema_version row; it holds no BEGIN/COMMIT itself.
--
-- The request table is dropped and created again rather than altered: ALTER
-- TABLE ADD COLUMN cannot add NOT NULL columns without a default, and its
-- rewritten CREATE text would no longer match schema/sqlite.sql. Nothing is
-- lost: request rows only live while an acquireLock waits, and libraries of
-- schema version 1 never wrote any.
DROP TABLE dlm_lock_requests;

-- Waiting acquirers, one row per (resource, owner) while an acquireLock waits:
-- the edges "owner waits for resource" of the wait-for graph that deadlock
-- detection follows (SqliteStore::registerWait). A row also carries the keys
-- that can block its resource, because the store never parses keys.
CREATE TABLE dlm_lock_requests (
  -- The key waited for; the primary key's first column serves "who waits for
  -- this key" and the unregistering of one wait.
  resource          TEXT NOT NULL COLLATE BINARY,
  -- The waiting owner's GUID.
  owner_id          TEXT NOT NULL,
  -- When the wait began, for operators.
  requested_at_ms   INTEGER NOT NULL,
  -- The waiter's deadline: after it the row is ignored by the graph walk and
  -- deleted by the next registration (a crashed waiter's row does not linger).
  expires_at_ms     INTEGER NOT NULL,
  -- The scoped keys of the resource's ancestors, root first, as a JSON array
  -- of strings built and read by SQLite's json functions ('[]' when none), so
  -- any key text round-trips exactly.
  ancestors         TEXT NOT NULL DEFAULT '[]',
  -- The resource's descendants are the keys k with
  -- descendants_begin <= k < descendants_end (byte order, like dlm_locks);
  -- both NULL when hierarchy is off.
  descendants_begin TEXT COLLATE BINARY,
  descendants_end   TEXT COLLATE BINARY,
  PRIMARY KEY (resource, owner_id)
) WITHOUT ROWID;

-- Serves the wait-for graph walk "which keys does this owner wait for"
-- (SELECT ... FROM dlm_lock_requests WHERE owner_id = ?). The expiry sweep
-- (DELETE ... WHERE expires_at_ms <= ?) scans the table instead: it only
-- holds the rows of waiters waiting right now.
CREATE INDEX dlm_lock_requests_owner ON dlm_lock_requests (owner_id);

INSERT INTO dlm_schema_version (version, description)
VALUES (2, 'lock requests carry expiry, ancestors and descendant range');

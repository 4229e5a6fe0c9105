-- dlm schema for SQLite: the whole current schema (version 2).
--
-- The store (SqliteStore::initialize with applyMigrations) and
-- `dlmctl migrate --db <file>` apply the files of migrations/sqlite/ instead,
-- each in one BEGIN IMMEDIATE transaction; this file is the same as their sum.
-- It holds no BEGIN/COMMIT because the applier supplies the transaction.
-- WAL mode is a property of the file that the store sets when it opens it.
--
-- Times are integer milliseconds since the Unix epoch by the application's
-- clock (SQLite has no server clock; all users of a file share one host).

-- One row per applied migration; the store refuses a file whose highest
-- version differs from the one it was built for.
CREATE TABLE dlm_schema_version (
  version     INTEGER PRIMARY KEY,  -- n of migrations/sqlite/V<n>__*.sql
  description TEXT NOT NULL,        -- what the migration did
  applied_at  TEXT NOT NULL         -- UTC time it was applied, for operators
              DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- One row per resource ever locked (and per ancestor of one). Rows are never
-- deleted: releasing sets status FREE, so fencing_token keeps growing across
-- acquisitions.
-- WITHOUT ROWID: the text key is the primary key, so the rows are stored in
-- the primary-key b-tree itself, in byte order of resource. A rowid table
-- would keep a second b-tree for the key and pay two lookups per row; here a
-- key lookup is one search and the descendant/prefix range scans read rows in
-- key order directly. Rows are small (a key of at most ~1.3 KB plus a few
-- short fields), which is what WITHOUT ROWID is designed for.
CREATE TABLE dlm_locks (
  -- The scoped key ("DC#farm#client#a.b.c"). BINARY collation compares bytes
  -- (memcmp), the order the manager's descendant ranges are built for. The
  -- primary key serves: the lookup of one key (acquire, release, extend,
  -- describe), the descendant check `resource >= ? AND resource < ?` and the
  -- prefix listing of held locks.
  resource       TEXT PRIMARY KEY COLLATE BINARY,
  -- crc32 of resource (zlib polynomial), for tools that look rows up by hash.
  resource_crc   INTEGER NOT NULL,
  -- HELD while an acquisition owns the row (even past expires_at_ms, until
  -- released or taken over); FREE otherwise.
  status         TEXT NOT NULL DEFAULT 'FREE' CHECK (status IN ('FREE', 'HELD')),
  -- The GUID of the owner (thread or task) of the latest acquisition.
  owner_id       TEXT,
  -- Random per acquisition; release and extend are conditional on it. Kept
  -- after release so a retried release of the same acquisition is still true.
  token          TEXT,
  -- Grows by one with every acquisition of this row; the first is 1. 0 means
  -- the row was created (as an ancestor or by a blocked attempt) but never
  -- acquired.
  fencing_token  INTEGER NOT NULL DEFAULT 0,
  -- When the latest acquisition took the row.
  acquired_at_ms INTEGER,
  -- The lease length last asked for (by the acquisition or an extension).
  ttl_ms         INTEGER,
  -- After this instant the lock may be taken by someone else.
  expires_at_ms  INTEGER,
  -- Who holds it, for operators: host name, process id, address (nullable;
  -- the library does not fill it yet).
  holder_host    TEXT,
  holder_pid     INTEGER,
  holder_ip      TEXT
) WITHOUT ROWID;

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
VALUES (1, 'create lock tables'),
       (2, 'lock requests carry expiry, ancestors and descendant range');

-- dlm schema for SQLite: the whole current schema (version 4).
--
-- The store (SqliteStore::initialize with applyMigrations) and
-- `dlmctl migrate --db <file>` apply the files of migrations/sqlite/ instead,
-- each in one BEGIN IMMEDIATE transaction; this file is the same as their sum.
-- It holds no BEGIN/COMMIT because the applier supplies the transaction.
-- A file made from this one records no checksums (applied by hand).
-- WAL mode is a property of the file that the store sets when it opens it.
--
-- Times are integer milliseconds since the Unix epoch by the application's
-- clock (SQLite has no server clock; all users of a file share one host).

-- One row per applied migration. A library built for schema version L
-- uses the file when its newest version equals L, or when the newest row's
-- compatible_from is <= L (the rolling-upgrade rule); otherwise
-- initialize() says which migration to apply, or to upgrade the library.
CREATE TABLE dlm_schema_version (
  version     INTEGER PRIMARY KEY,  -- n of migrations/sqlite/V<n>__*.sql
  description TEXT NOT NULL,        -- what the migration did
  applied_at  TEXT NOT NULL         -- UTC time it was applied, for operators
              DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  -- CRC-32 (zlib polynomial) of the migration file's text as dlm's applier
  -- ran it; NULL when applied by hand (sqlite3, this file) or before
  -- version 3. Added by V3 (ALTER TABLE ADD COLUMN, hence last).
  checksum        INTEGER,
  -- The oldest library schema version the file serves while this is its
  -- newest row; NULL (before version 3): only a library for exactly this
  -- version.
  compatible_from INTEGER
);

-- One row per resource locked (and per ancestor of one). Releasing sets
-- status FREE, so fencing_token keeps growing across acquisitions; only
-- SqliteStore::purgeIdle deletes rows (idle ones), after raising
-- dlm_fencing_floor so that a re-created row starts above every token the
-- deleted one issued.
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
  -- Grows by one with every acquisition of this row. A new row starts at the
  -- fencing floor (0 until a purge raised it; trigger
  -- dlm_locks_start_at_fencing_floor), so the first acquisition of a key gets
  -- floor + 1. acquired_at_ms NULL means the row was created (as an ancestor
  -- or by a blocked attempt) but never acquired.
  fencing_token  INTEGER NOT NULL DEFAULT 0,
  -- When the latest acquisition took the row.
  acquired_at_ms INTEGER,
  -- The lease length last asked for (by the acquisition or an extension).
  ttl_ms         INTEGER,
  -- After this instant the lock may be taken by someone else.
  expires_at_ms  INTEGER,
  -- Who took it last, for operators: the holder's host name and process id,
  -- filled by every acquisition. holder_ip stays NULL on SQLite (no network
  -- peer; the column keeps the table the same as PostgreSQL's).
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
  -- The mode the waiter asks for (a request conflicts with holds and other
  -- requests when either side is EXCLUSIVE). Added by V4 (ALTER TABLE ADD
  -- COLUMN, hence after the other columns).
  mode              TEXT NOT NULL DEFAULT 'EXCLUSIVE'
                    CHECK (mode IN ('EXCLUSIVE', 'SHARED')),
  PRIMARY KEY (resource, owner_id)
) WITHOUT ROWID;

-- Serves the wait-for graph walk "which keys does this owner wait for"
-- (SELECT ... FROM dlm_lock_requests WHERE owner_id = ?). The expiry sweep
-- (DELETE ... WHERE expires_at_ms <= ?) scans the table instead: it only
-- holds the rows of waiters waiting right now.
CREATE INDEX dlm_lock_requests_owner ON dlm_lock_requests (owner_id);

-- The fencing high-water mark, one row. SqliteStore::purgeIdle raises it to
-- the greatest fencing token among the rows it deletes, in the same
-- transaction, so a key's fencing token never goes backwards.
CREATE TABLE dlm_fencing_floor (
  -- Always 1: the table holds exactly one row.
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  -- No fencing token of a deleted row is greater than this.
  fencing_token INTEGER NOT NULL DEFAULT 0 CHECK (fencing_token >= 0)
);

INSERT INTO dlm_fencing_floor (id, fencing_token) VALUES (1, 0);

-- New rows start at the floor, whoever inserts them. Fires only for rows
-- actually inserted (an INSERT OR IGNORE of an existing key does not fire
-- it): one read of the one-row floor table per new row, and an update of the
-- new row only after a purge has raised the floor.
CREATE TRIGGER dlm_locks_start_at_fencing_floor
AFTER INSERT ON dlm_locks
FOR EACH ROW
WHEN NEW.fencing_token < (SELECT fencing_token FROM dlm_fencing_floor
                          WHERE id = 1)
BEGIN
  UPDATE dlm_locks
  SET fencing_token = (SELECT fencing_token FROM dlm_fencing_floor
                       WHERE id = 1)
  WHERE resource = NEW.resource;
END;

-- SHARED holds, one row per holder: any number per key at once. The key's
-- EXCLUSIVE state and its fencing counter stay in dlm_locks (every SHARED
-- acquisition also moves the key's counter there); a hold's fencing token is
-- never above its key row's counter, so purging follows the same floor rule.
-- Release deletes the row, an EXCLUSIVE takeover deletes the expired ones,
-- SqliteStore::purgeIdle the stale ones. WITHOUT ROWID as dlm_locks: the
-- rows of one key lie together in key order.
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

INSERT INTO dlm_schema_version (version, description, compatible_from)
VALUES (1, 'create lock tables', NULL),
       (2, 'lock requests carry expiry, ancestors and descendant range', NULL),
       (3, 'compatibility, checksums and fencing floor for purge', 2),
       (4, 'shared holds and request modes', 4);

-- Migration V3 for SQLite: the rolling-upgrade record, migration checksums
-- and the fencing floor that lets idle rows be purged (dlm schema version 3).
--
-- Applied like V1 and V2: in one BEGIN IMMEDIATE transaction together with
-- its dlm_schema_version row; it holds no BEGIN/COMMIT itself.
--
-- Re-runnable only through dlm's applier (SqliteStore::initialize with
-- applyMigrations, `dlmctl migrate`), which runs a migration only when the
-- file's version is the one before it. SQLite has no ALTER TABLE ADD COLUMN
-- IF NOT EXISTS, so running this file by hand a second time fails at the
-- first ALTER ("duplicate column name") and its transaction changes nothing.
-- Everything after the ALTERs is idempotent (IF NOT EXISTS, OR IGNORE).
--
-- Compatibility: this file serves libraries built for schema version 2 too
-- (compatible_from 2). It only adds: two nullable columns that version-2
-- libraries never name (they read version, description and applied_at by
-- name), a table they never touch and a trigger on their INSERT OR IGNORE
-- into dlm_locks, which makes rows they create start at the fencing floor
-- as well. Note that a version-2 library's initialize() accepts exactly
-- version 2: instances already running keep working, but one (re)started
-- after this file is applied refuses it and must be upgraded.

-- checksum: CRC-32 (zlib polynomial) of the migration file's text as dlm's
-- applier ran it, recorded by the applier; NULL when the file was applied
-- by hand (sqlite3, the schema file) or before version 3.
-- ADD COLUMN appends the column to the table's CREATE text in sqlite_master;
-- schema/sqlite.sql declares the same columns in the same order.
ALTER TABLE dlm_schema_version ADD COLUMN checksum INTEGER;

-- compatible_from: the oldest library schema version this file still serves
-- once this migration is its newest. A library built for schema version L
-- uses the file when L equals its newest version, or when compatible_from
-- of the newest row is <= L. NULL (rows before version 3): only a library
-- for exactly that version.
ALTER TABLE dlm_schema_version ADD COLUMN compatible_from INTEGER;

-- The fencing high-water mark, one row. SqliteStore::purgeIdle raises it to
-- the greatest fencing token among the rows it deletes, in the same
-- transaction; every row created afterwards starts at it (the trigger
-- below), so the first acquisition of a purged and re-created key gets
-- floor + 1 and a key's fencing token never goes backwards.
CREATE TABLE IF NOT EXISTS dlm_fencing_floor (
  -- Always 1: the table holds exactly one row.
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  -- No fencing token of a deleted row is greater than this.
  fencing_token INTEGER NOT NULL DEFAULT 0 CHECK (fencing_token >= 0)
);

INSERT OR IGNORE INTO dlm_fencing_floor (id, fencing_token) VALUES (1, 0);

-- New rows start at the floor, whoever inserts them (this library's
-- tryAcquire, a version-2 library, a tool). Fires only for rows actually
-- inserted (an INSERT OR IGNORE of an existing key does not fire it): one
-- read of the one-row floor table per new row, and an update of the new row
-- only after a purge has raised the floor.
CREATE TRIGGER IF NOT EXISTS dlm_locks_start_at_fencing_floor
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

INSERT OR IGNORE INTO dlm_schema_version (version, description,
                                          compatible_from)
VALUES (3, 'compatibility, checksums and fencing floor for purge', 2);

-- Migration V5 for SQLite: caps a DBA can set, and an index that keeps the
-- cost of the wait path and of the purge independent of other owners'
-- request rows (dlm schema version 5).
--
-- Applied like V1 to V4: in one BEGIN IMMEDIATE transaction together with
-- its dlm_schema_version row; it holds no BEGIN/COMMIT itself. Running it by
-- hand a second time fails at CREATE TABLE ("already exists") and changes
-- nothing.
--
-- Compatibility: compatible_from stays 4. This file only adds a table and
-- an index. A library built for schema version 4 never names either: it
-- keeps working on the file, just without the caps (it enforces none of
-- them), and its writes to dlm_lock_requests keep the new index up to date
-- as SQLite maintains every index itself. Nothing it does becomes wrong, so
-- its processes may keep running while this file is applied and
-- afterwards (the rolling-upgrade rule of docs/design.md).
--
-- What the store does with it (src/sqlite/): every acquire, extend and
-- registerWait reads the one row of dlm_limits inside its own transaction
-- (one primary-key lookup), so a change applies to the next call of every
-- process on the file, without a restart:
--
--   UPDATE dlm_limits SET max_shared_holders_per_key = 5000;
--
-- A call over a cap is refused with INVALID_ARGUMENT and a message naming
-- the column and its value, e.g.
-- "dlm: 65 keys in one call (limit max_keys_per_call = 64)".
-- The PostgreSQL schema has the same table, columns and defaults.

-- The caps, one row.
CREATE TABLE dlm_limits (
  -- Always 1: the table holds exactly one row.
  id                         INTEGER PRIMARY KEY CHECK (id = 1),
  -- The longest lease an acquire or an extension may ask for, in
  -- milliseconds (default 365 days).
  max_ttl_ms                 INTEGER NOT NULL DEFAULT 31536000000
                             CHECK (max_ttl_ms > 0),
  -- The longest scoped key an acquire may name, in bytes (the whole
  -- "DC#farm#client#id").
  max_key_bytes              INTEGER NOT NULL DEFAULT 8192
                             CHECK (max_key_bytes > 0),
  -- How many keys one acquire may touch: the key and its ancestors.
  max_keys_per_call          INTEGER NOT NULL DEFAULT 64
                             CHECK (max_keys_per_call > 0),
  -- How many live (unexpired) request rows one owner may have; a
  -- registerWait for another key beyond them is refused, one renewing the
  -- owner's request for the same key is not.
  max_requests_per_owner     INTEGER NOT NULL DEFAULT 100
                             CHECK (max_requests_per_owner > 0),
  -- How many live SHARED holds one key may have; a SHARED acquire that
  -- would add one more is refused.
  max_shared_holders_per_key INTEGER NOT NULL DEFAULT 1000
                             CHECK (max_shared_holders_per_key > 0)
);

INSERT INTO dlm_limits (id) VALUES (1);

-- Serves the expiry sweep of every registerWait
-- (DELETE FROM dlm_lock_requests WHERE expires_at_ms <= ?) and the purge's
-- choice of ended requests (SqliteStore::purgeIdle). Without it both scanned
-- the whole table: with 100,000 live requests of other owners in the file, a
-- registerWait read every one of them. Its upkeep is one more b-tree entry
-- per request row written, on the wait path only (an uncontended acquire
-- writes no request row).
CREATE INDEX dlm_lock_requests_expiry ON dlm_lock_requests (expires_at_ms);

INSERT INTO dlm_schema_version (version, description, compatible_from)
VALUES (5, 'limits, request expiry index, stale request purge', 4);

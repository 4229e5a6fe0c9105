-- Migration V6 for SQLite: the waiter's own deadline on its request row
-- (dlm schema version 6), for the listings.
--
-- Applied like V1 to V5: in one BEGIN IMMEDIATE transaction together with
-- its dlm_schema_version row; it holds no BEGIN/COMMIT itself. Running it by
-- hand a second time fails at ADD COLUMN ("duplicate column name") and
-- changes nothing.
--
-- A request row's expires_at_ms is its lease (the waiter's deadline + 1 s,
-- at most 10 s, renewed every 5 s), not when its waiter gives up, which is
-- what `dlmctl waiters` shows as its DEADLINE. The store now records that
-- deadline beside it (registerWait's WaitRequest::untilDeadline) and
-- listWaiters returns it (WaitRecord::deadline).
--
-- Compatibility: compatible_from stays 4. No rule reads the column: a
-- request counts until expires_at_ms as before. A library built for schema
-- version 4 or 5 names its columns when it writes a request row, so its
-- rows get NULL here (shown as no deadline recorded) and nothing it does
-- changes meaning; its processes may keep running while this file is
-- applied and afterwards (the rolling-upgrade rule of docs/design.md).

-- When the waiter's acquireLock gives up, in milliseconds since the epoch
-- (the application's clock, as every time here); NULL when it waits without
-- a deadline or a library before schema version 6 made the row. ADD COLUMN
-- appends the column after the last one in the table's CREATE text;
-- schema/sqlite.sql declares it there.
ALTER TABLE dlm_lock_requests ADD COLUMN wait_until_ms INTEGER;

INSERT INTO dlm_schema_version (version, description, compatible_from)
VALUES (6, 'waiter deadlines on request rows', 4);

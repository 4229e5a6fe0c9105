-- dlm migration V14: release notifications name no key.
-- Applied in one transaction after V13, in the same schema; records
-- version 14. Re-runnable.
--
-- Until V13 a release that freed a key somebody waited for sent
-- NOTIFY dlm_release with the key as its payload. LISTEN needs no privilege,
-- so any login of the database (with no dlm role at all) could collect the
-- names of every tenant's keys as they were released. So:
-- - the payload is '1 ' followed by hints: the freed key's, then those of
--   its ancestors (root first, at most 256), space-separated. A hint is the
--   first 16 hex digits of SHA-256 of a secret of this schema followed by
--   the key; the secret lives in dlm_release_secret, which no role but the
--   schema owner can read;
-- - dlm_release_hints(key) gives a waiter the hints of its key and of the
--   key's ancestors (server-derived, as the payload's), after the same
--   tenancy check as a wait (22023 for a non-key, 42501 for a login that is
--   not a member of the key's client role). A waiter is woken when the
--   payload's first hint is its key's or one of its ancestors', or when one
--   of the payload's ancestor hints is its key's (a descendant was freed).
--   A login learns the hints of its own clients' keys only, so it cannot
--   match another tenant's payloads against names it guesses.
--
-- Rolling upgrade: the same signatures. A library of schema 13 or older
-- reads a payload as a key, finds no waiter for it and polls
-- (sleepBetweenRetries) instead of being woken: slower, never wrong.
-- compatible_from = 4.

-- ---------------------------------------------------------------- secret
CREATE TABLE IF NOT EXISTS dlm_release_secret (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  secret   text NOT NULL CHECK (length(secret) = 64)
);
COMMENT ON TABLE dlm_release_secret IS
  'dlm: the secret of release hints (NOTIFY dlm_release payloads); readable by the schema owner only.';
COMMENT ON COLUMN dlm_release_secret.only_row IS
  'dlm: true; the table has one row.';
COMMENT ON COLUMN dlm_release_secret.secret IS
  'dlm: 64 hex digits; a hint is the first 16 hex digits of SHA-256 of this followed by the key.';
-- 256 bits from the server's strong random source (gen_random_uuid).
INSERT INTO dlm_release_secret (secret)
  SELECT encode(sha256(convert_to(gen_random_uuid()::text
                                  || gen_random_uuid()::text, 'UTF8')), 'hex')
  ON CONFLICT (only_row) DO NOTHING;

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_release_payload (internal): what NOTIFY dlm_release carries when p_key
-- is freed: '1 ', the key's hint, then its ancestors' hints (root first, at
-- most 256; the client's recorded separator), space-separated.
CREATE OR REPLACE FUNCTION dlm_release_payload(p_key text) RETURNS text
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_secret text;
  v_scope  text;
  v_sep    text;
  v_keys   text[] := ARRAY[p_key];
BEGIN
  SELECT s.secret INTO v_secret FROM dlm_release_secret s;
  v_scope := dlm_key_scope(p_key);
  IF v_scope IS NOT NULL THEN
    SELECT c.separator INTO v_sep FROM dlm_clients c
     WHERE c.client_id = dlm_scope_client(v_scope) AND c.hierarchy;
    IF v_sep IS NOT NULL THEN
      v_keys := v_keys || (dlm_path_ancestors(p_key, v_scope, v_sep))[1:256];
    END IF;
  END IF;
  RETURN '1 ' || (SELECT string_agg(left(encode(sha256(convert_to(
                                      v_secret || u.k, 'UTF8')), 'hex'), 16),
                                    ' ' ORDER BY u.i)
                    FROM unnest(v_keys) WITH ORDINALITY AS u (k, i));
END
$$;
COMMENT ON FUNCTION dlm_release_payload(text) IS
  'dlm (internal): the NOTIFY dlm_release payload for a freed key: hints, no key.';

-- dlm_release_hints (client): the hints of p_key and of its ancestors, as
-- dlm_release_payload sends them, for a waiter to match payloads with.
-- Checked as a wait is (and binds an unbound client at first use, as a
-- wait does): 22023 for a non-key, 42501 for a non-member.
CREATE OR REPLACE FUNCTION dlm_release_hints(p_key text) RETURNS text[]
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM dlm_client_for(p_key, true);
  RETURN string_to_array(substr(dlm_release_payload(p_key), 3), ' ');
END
$$;
COMMENT ON FUNCTION dlm_release_hints(text) IS
  'dlm (client): the release hints a waiter for a key matches NOTIFY dlm_release payloads with.';

-- The functions that NOTIFY: the same bodies as before, with the hints as
-- the payload.
CREATE OR REPLACE FUNCTION dlm_force_release(p_key text) RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
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
  IF v_freed THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
  RETURN v_freed;
END
$$;

CREATE OR REPLACE FUNCTION dlm_notify_waiters(p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER
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
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION dlm_release(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  IF p_ancestors IS NULL OR cardinality(p_ancestors) = 0 THEN
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
     WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
    RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource >= p_key
                         AND r.resource < coalesce(p_desc_end, p_key || chr(1))
                         AND r.expires_at > clock_timestamp())
      INTO v_wake;
  ELSE
    UPDATE dlm_locks l
       SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
     WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
    RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource >= p_key
                         AND r.resource < coalesce(p_desc_end, p_key || chr(1))
                         AND r.expires_at > clock_timestamp())
           OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                       WHERE r.resource = ANY (p_ancestors)
                         AND r.expires_at > clock_timestamp())
      INTO v_wake;
  END IF;
  IF FOUND THEN
    IF v_wake THEN
      PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
    END IF;
    RETURN true;
  END IF;
  -- Not HELD by this token: a retried release (the token is still on the
  -- FREE row) answers true without writing anything.
  RETURN EXISTS (SELECT 1 FROM dlm_locks l
                  WHERE l.resource = p_key AND l.token = p_token);
END
$$;

CREATE OR REPLACE FUNCTION dlm_release_shared(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  DELETE FROM dlm_shared_holds s WHERE s.resource = p_key AND s.token = p_token
  RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = p_key
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = ANY (p_ancestors)
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                       AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION dlm_release_shared_within(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
BEGIN
  DELETE FROM dlm_shared_holds s WHERE s.resource = p_key AND s.token = p_token
  RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = p_key
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = ANY (p_ancestors)
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                       AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION dlm_release_within(p_key text, p_token text, p_ancestors text[], p_desc_begin text, p_desc_end text) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_wake boolean;
BEGIN
  UPDATE dlm_locks l
     SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
  RETURNING EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = p_key
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource = ANY (p_ancestors)
                       AND r.expires_at > clock_timestamp())
         OR EXISTS (SELECT 1 FROM dlm_lock_requests r
                     WHERE r.resource >= p_desc_begin AND r.resource < p_desc_end
                       AND r.expires_at > clock_timestamp())
    INTO v_wake;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'lock % is no longer held by this acquisition (released, or expired and taken over)', p_key
      USING ERRCODE = 'DLM01';
  END IF;
  IF v_wake THEN
    PERFORM pg_notify('dlm_release', dlm_release_payload(p_key));
  END IF;
END
$$;

-- Pinned to this schema as every dlm function is (V9's rule): pg_catalog
-- first, pg_temp last.
DO $$
DECLARE
  v_fn text;
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  FOREACH v_fn IN ARRAY ARRAY[
      'dlm_release_payload(text)', 'dlm_release_hints(text)',
      'dlm_force_release(text)',
      'dlm_notify_waiters(text, text[], text, text)',
      'dlm_release(text, text, text[], text, text)',
      'dlm_release_shared(text, text, text[], text, text)',
      'dlm_release_shared_within(text, text, text[], text, text)',
      'dlm_release_within(text, text, text[], text, text)']
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                   v_fn, current_schema());
  END LOOP;
END
$$;

-- ---------------------------------------------------------- privileges
-- New functions are EXECUTE for PUBLIC when created, and a DBA's default
-- privileges may have granted the new table: nothing for anyone, then the
-- client role may call dlm_release_hints (V9's rule: functions not named
-- are internal).
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
    EXECUTE format('REVOKE ALL ON TABLE %I.dlm_release_secret FROM %s',
                   v_schema, v_grantee);
    EXECUTE format('REVOKE ALL ON FUNCTION %I.dlm_release_payload(text) FROM %s',
                   v_schema, v_grantee);
    EXECUTE format('REVOKE ALL ON FUNCTION %I.dlm_release_hints(text) FROM %s',
                   v_schema, v_grantee);
  END LOOP;
  EXECUTE format('GRANT EXECUTE ON FUNCTION %1$I.dlm_release_hints(text) TO %2$I',
                 v_schema, v_client);
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (14, 'release notifications carry hints, not keys', 4)
  ON CONFLICT (version) DO NOTHING;

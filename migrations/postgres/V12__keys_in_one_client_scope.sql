-- dlm migration V12: every key belongs to exactly one non-empty client, and
-- an attempt's scans stay in that client's keys.
-- Applied in one transaction after V11, in the same schema; records
-- version 12. Re-runnable.
--
-- Until V11 the server learnt a key's client by parsing the key, and a key
-- of another shape ('DC', 'DC#default', 'DC#default#orders', 'XDC#orders')
-- parsed to the client ''. First use bound '' to whoever came first, with
-- the separator of that first call, '#' included; then the descendant range
-- of 'DC#default#orders' was every key of the client 'orders', and
-- 'DC#'..'DC$' every DC key: one call named other tenants' keys
-- (blocked_by), row-locked their holds and took over their expired ones.
-- So:
-- - dlm_key_scope answers NULL for a key that is not
--   'DC#<farm>#<client>#<id>' or 'XDC#<client>#<id>' with farm, client and
--   id non-empty; dlm_client_for refuses such a key (22023, naming the two
--   shapes) before anything is read or locked, which every acquire, wait,
--   unregistration and cycle query goes through.
-- - dlm_check_path refuses a separator that is '#' (the scope's own
--   delimiter) or not printable ASCII, as the library does.
-- - dlm_take_over_expired row-locks, and takes over, only holds in the
--   attempt's own client scope (the scope of its descendant range or its
--   first ancestor), whatever ranges it is given.
-- - dlm_clients refuses a client id that is empty or holds '#', and a
--   separator that is '#' or not printable ASCII (CHECK constraints).
-- - Repair of what such calls may have recorded: holds under keys of no
--   client are freed (their rows stay FREE, for purge), their shared holds
--   and requests deleted, the client '' (and any id with '#') forgotten,
--   and a recorded separator '#' forgotten (the client's next first use
--   records its setting again).
--
-- Rolling upgrade: the same signatures; the library has only ever sent
-- keys of the two shapes and separators of printable ASCII other than '#'.
-- compatible_from = 4.

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_key_scope (internal): the part of a key before its lock id:
-- 'DC#<farm>#<client>#' or 'XDC#<client>#', with farm, client and id
-- non-empty; NULL for any other text. A plain SQL expression without a
-- pinned search_path, so that the planner inlines it where it is called on
-- a variable (V11).
CREATE OR REPLACE FUNCTION dlm_key_scope(p_key text) RETURNS text
  LANGUAGE sql IMMUTABLE
AS $$
  SELECT CASE
           WHEN p_key LIKE 'DC#%#%#_%'
                AND split_part(p_key, '#', 2) <> ''
                AND split_part(p_key, '#', 3) <> ''
             THEN 'DC#' || split_part(p_key, '#', 2) || '#'
                  || split_part(p_key, '#', 3) || '#'
           WHEN p_key LIKE 'XDC#%#_%' AND split_part(p_key, '#', 2) <> ''
             THEN 'XDC#' || split_part(p_key, '#', 2) || '#'
         END
$$;

-- dlm_client_for (internal): the binding of p_key's client, checked: the
-- key must be one of the two shapes (22023 otherwise), the login a member
-- of the client's role (42501 otherwise, naming both). An unbound client is
-- bound to the login when p_bind (acquire, wait), else answered as a row
-- with a NULL client_id (release, extend, unregister: only holds and
-- requests made before V7 can be under an unbound client).
CREATE OR REPLACE FUNCTION dlm_client_for(
    p_key text, p_bind boolean,
    OUT client_id text, OUT separator text, OUT hierarchy boolean)
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
  v_client       text;
  v_row          record;
  v_lock_timeout text;
BEGIN
  v_client := dlm_scope_client(dlm_key_scope(p_key));
  IF v_client IS NULL THEN
    RAISE EXCEPTION 'dlm: "%" is not a lock key', dlm_shown_key(coalesce(p_key, ''))
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'A key is DC#<farm>#<client>#<id> or XDC#<client>#<id>, none of farm, client and id empty, and farm and client without ''#''.';
  END IF;
  SELECT * INTO v_row FROM dlm_clients c WHERE c.client_id = v_client;
  IF NOT FOUND THEN
    IF NOT p_bind THEN
      RETURN;
    END IF;
    -- First use. A concurrent first use of the same client waits here for
    -- the other's transaction, then finds its row. Not bounded by the
    -- caller's lock_timeout (rowLockWait): that bound answers "the key is
    -- busy", and no key is. The call's statement_timeout bounds it.
    v_lock_timeout := current_setting('lock_timeout');
    PERFORM set_config('lock_timeout', '0', true);
    INSERT INTO dlm_clients AS c
        (client_id, role_oid, role_name, first_use, bound_by)
      SELECT v_client, r.oid, r.rolname, true, session_user
        FROM pg_roles r WHERE r.rolname = session_user
      ON CONFLICT (client_id) DO NOTHING;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    SELECT * INTO v_row FROM dlm_clients c WHERE c.client_id = v_client;
  END IF;
  IF NOT coalesce(pg_has_role(session_user, v_row.role_oid, 'MEMBER'), false) THEN
    RAISE EXCEPTION 'dlm: client "%" is bound to role "%"; login "%" is not a member of it',
      v_client,
      coalesce((SELECT r.rolname FROM pg_roles r WHERE r.oid = v_row.role_oid),
               v_row.role_name),
      session_user
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'GRANT that role to the login, or have an admin bind the client to the service''s role (dlmctl clients bind).';
  END IF;
  client_id := v_row.client_id;
  separator := v_row.separator;
  hierarchy := v_row.hierarchy;
END
$$;

-- dlm_check_path (internal): tenancy and recorded hierarchy of an acquire
-- or a wait: the key's client (dlm_client_for: its shape, the login's
-- membership, a first use), the call's descendant range and ancestors
-- those of the key's path under the separator the client uses, which is
-- printable ASCII other than '#'; a client's first call records its
-- setting.
CREATE OR REPLACE FUNCTION dlm_check_path(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_client record;
  v_scope  text;
  v_sep    text;
  v_hier   boolean;
  v_expect text[];
BEGIN
  SELECT * INTO v_client FROM dlm_client_for(p_key, true);
  -- The setting this call uses: no descendant range, no hierarchy.
  v_hier := p_desc_begin IS NOT NULL OR p_desc_end IS NOT NULL;
  IF v_hier THEN
    v_sep := substr(p_desc_begin, length(p_key) + 1);
    IF NOT starts_with(p_desc_begin, p_key) OR length(v_sep) <> 1
       OR p_desc_end IS DISTINCT FROM p_key || chr(ascii(v_sep) + 1) THEN
      RAISE EXCEPTION 'dlm: the descendant range sent for "%" is not one of its path', dlm_shown_key(p_key)
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_sep = '#' OR ascii(v_sep) NOT BETWEEN 33 AND 126 THEN
      RAISE EXCEPTION 'dlm: the hierarchy separator must be printable ASCII other than ''#''; "%" sent one of code %', dlm_shown_key(p_key), ascii(v_sep)
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
  END IF;
  IF v_client.hierarchy IS NULL THEN
    UPDATE dlm_clients c SET hierarchy = v_hier, separator = v_sep
     WHERE c.client_id = v_client.client_id AND c.hierarchy IS NULL
    RETURNING c.* INTO v_client;
    IF NOT FOUND THEN
      SELECT * INTO v_client FROM dlm_clients c
       WHERE c.client_id = v_client.client_id;
    END IF;
  END IF;
  IF v_client.hierarchy IS DISTINCT FROM v_hier
     OR v_client.separator IS DISTINCT FROM v_sep THEN
    RAISE EXCEPTION 'dlm: client "%" is recorded as %; this call uses %',
      v_client.client_id,
      CASE WHEN v_client.hierarchy
           THEN format('using the hierarchy separator "%s"', v_client.separator)
           ELSE 'using no hierarchy' END,
      CASE WHEN v_hier THEN format('the separator "%s"', v_sep)
           ELSE 'no hierarchy' END
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'Configure every instance of a client alike; an admin can forget the recorded setting with dlmctl clients unbind.';
  END IF;
  IF v_hier THEN
    v_scope := dlm_key_scope(p_key);
    v_expect := dlm_path_ancestors(p_key, v_scope, v_sep);
  ELSE
    v_expect := '{}';
  END IF;
  IF coalesce(p_ancestors, '{}') IS DISTINCT FROM v_expect THEN
    RAISE EXCEPTION 'dlm: the ancestors sent for "%" are not those of its path', dlm_shown_key(p_key)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- dlm_take_over_expired (internal): for an attempt that found nothing live
-- in its way, the expired holds of its ancestors (p_ancestors) and of its
-- descendants (p_desc_begin <= key < p_desc_end) that conflict with it
-- (EXCLUSIVE ones; SHARED ones too unless p_shared) are row-locked, in key
-- order: an EXCLUSIVE hold's row FOR NO KEY UPDATE (which the other
-- acquirers' FOR KEY SHARE on an ancestor lets through, and a guard's FOR
-- SHARE does not), a SHARED hold's row FOR UPDATE; so a guarded transaction
-- of their holder is waited for (the caller's lock_timeout), and so is an
-- extend in progress. Then, in fresh statements, the first one
-- that is live again (extended meanwhile) is returned and nothing changes;
-- otherwise they are taken over and NULL is returned. V12: only rows in
-- the attempt's own client scope (that of its descendant range, else of
-- its first ancestor) are locked or taken over, whatever the ranges say.
-- Runs as its caller (the schema owner).
CREATE OR REPLACE FUNCTION dlm_take_over_expired(
    p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_shared boolean)
  RETURNS text
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_rows    integer;
  v_found   integer := 0;
  v_blocker text;
  v_scope   text;
BEGIN
  v_scope := dlm_key_scope(coalesce(p_desc_begin, p_ancestors[1]));
  IF v_scope IS NULL THEN
    RETURN NULL;  -- no path: nothing of another key is in its way
  END IF;
  -- One index probe per key condition (see dlm_try_acquire).
  PERFORM 1 FROM dlm_locks l
    WHERE l.resource = ANY (p_ancestors) AND l.status = 'HELD'
      AND starts_with(l.resource, v_scope)
    ORDER BY l.resource FOR NO KEY UPDATE OF l;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  v_found := v_found + v_rows;
  PERFORM 1 FROM dlm_locks l
    WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
      AND l.status = 'HELD' AND starts_with(l.resource, v_scope)
    ORDER BY l.resource FOR NO KEY UPDATE OF l;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  v_found := v_found + v_rows;
  IF NOT p_shared THEN
    PERFORM 1 FROM dlm_shared_holds s
      WHERE s.resource = ANY (p_ancestors)
        AND starts_with(s.resource, v_scope)
      ORDER BY s.resource, s.token FOR UPDATE OF s;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found + v_rows;
    PERFORM 1 FROM dlm_shared_holds s
      WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
        AND starts_with(s.resource, v_scope)
      ORDER BY s.resource, s.token FOR UPDATE OF s;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    v_found := v_found + v_rows;
  END IF;
  IF v_found = 0 THEN
    RETURN NULL;
  END IF;

  -- Live again? (Rows are locked now: nothing changes them until we end.)
  SELECT l.resource INTO v_blocker FROM dlm_locks l
    WHERE l.resource = ANY (p_ancestors) AND starts_with(l.resource, v_scope)
      AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
    ORDER BY l.resource LIMIT 1;
  IF v_blocker IS NULL THEN
    SELECT l.resource INTO v_blocker FROM dlm_locks l
      WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
        AND starts_with(l.resource, v_scope)
        AND l.status = 'HELD' AND l.expires_at > clock_timestamp()
      ORDER BY l.resource LIMIT 1;
  END IF;
  IF v_blocker IS NULL AND NOT p_shared THEN
    SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
      WHERE s.resource = ANY (p_ancestors) AND starts_with(s.resource, v_scope)
        AND s.expires_at > clock_timestamp()
      ORDER BY s.resource LIMIT 1;
    IF v_blocker IS NULL THEN
      SELECT s.resource INTO v_blocker FROM dlm_shared_holds s
        WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
          AND starts_with(s.resource, v_scope)
          AND s.expires_at > clock_timestamp()
        ORDER BY s.resource LIMIT 1;
    END IF;
  END IF;
  IF v_blocker IS NOT NULL THEN
    RETURN v_blocker;
  END IF;

  -- Taken over: FREE without the token (the holder's extend finds nothing,
  -- its release answers false), the lease ended now at the latest.
  UPDATE dlm_locks l
     SET status = 'FREE', token = NULL,
         expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = ANY (p_ancestors) AND l.status = 'HELD'
     AND starts_with(l.resource, v_scope);
  UPDATE dlm_locks l
     SET status = 'FREE', token = NULL,
         expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource >= p_desc_begin AND l.resource < p_desc_end
     AND l.status = 'HELD' AND starts_with(l.resource, v_scope);
  IF NOT p_shared THEN
    DELETE FROM dlm_shared_holds s
     WHERE s.resource = ANY (p_ancestors) AND starts_with(s.resource, v_scope);
    DELETE FROM dlm_shared_holds s
     WHERE s.resource >= p_desc_begin AND s.resource < p_desc_end
       AND starts_with(s.resource, v_scope);
  END IF;
  RETURN NULL;
END
$$;

-- Pinned to this schema as every dlm function is (V9's rule): pg_catalog
-- first, pg_temp last.
DO $$
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  EXECUTE format('ALTER FUNCTION dlm_client_for(text, boolean) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
  EXECUTE format('ALTER FUNCTION dlm_check_path(text, text[], text, text) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
  EXECUTE format('ALTER FUNCTION dlm_take_over_expired(text[], text, text, boolean) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
END
$$;

-- ---------------------------------------------------------------- repair
-- What a call with a key of no client may have left: its holds are freed
-- (the rows stay, FREE, for purge; their fencing tokens are kept), its
-- shared holds and requests deleted.
UPDATE dlm_locks l
   SET status = 'FREE', token = NULL,
       expires_at = least(l.expires_at, clock_timestamp())
 WHERE l.status = 'HELD' AND dlm_key_scope(l.resource) IS NULL;
DELETE FROM dlm_shared_holds s WHERE dlm_key_scope(s.resource) IS NULL;
DELETE FROM dlm_lock_requests r WHERE dlm_key_scope(r.resource) IS NULL;
-- Client ids that no key can have, and recorded separators the library
-- never sends: forgotten (a client's next first use records its setting).
DELETE FROM dlm_clients c
 WHERE c.client_id = '' OR position('#' IN c.client_id) > 0;
UPDATE dlm_clients c SET hierarchy = NULL, separator = NULL
 WHERE c.separator = '#' OR ascii(c.separator) NOT BETWEEN 33 AND 126;

ALTER TABLE dlm_clients
  DROP CONSTRAINT IF EXISTS dlm_clients_client_id_shape_check,
  ADD CONSTRAINT dlm_clients_client_id_shape_check
    CHECK (client_id <> '' AND position('#' IN client_id) = 0),
  DROP CONSTRAINT IF EXISTS dlm_clients_separator_shape_check,
  ADD CONSTRAINT dlm_clients_separator_shape_check
    CHECK (separator <> '#' AND ascii(separator) BETWEEN 33 AND 126);

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (12, 'every key in one non-empty client scope', 4)
  ON CONFLICT (version) DO NOTHING;

-- dlm migration V13: the wait-for graph walk is bounded in time, and the
-- walk again after a registration costs what the first one does.
-- Applied in one transaction after V12, in the same schema; records
-- version 13. Re-runnable.
--
-- Until V12 the walk visited at most 1,000 owners, but one owner's step
-- cost grew with its requests and theirs with the rows in the way: a graph
-- of 1,000 owners with 3 requests each took dlm_wait_cycle 8 s (2.3 s with
-- one request each), and a waiting acquire failed with CONNECTION_ERROR
-- at its operationTimeout because of a graph other owners made. So:
-- - dlm_find_cycle stops after 10,000 edges or about 100 ms
--   (clock_timestamp(), checked before each owner's step and after each
--   edge), and answers as past 1,000 owners: no cycle, the wait is
--   recorded and ends at its timeout if it was a deadlock. A cycle found
--   before the bound is reported as before; breadth first, so short cycles
--   (the usual deadlocks) come first.
-- - dlm_wait_cycle took about 7 times the walk inside dlm_register_wait:
--   it passed the request row's ancestors and descendant range, columns of
--   collation "C", to dlm_confirmed_cycle, which made "C" the walk's input
--   collation and so the collation of its owner variables; the owner index
--   of dlm_lock_requests (the column's default collation) then did not
--   match `owner_id = v_owners[i]`, and each owner's step read the whole
--   request table. dlm_wait_cycle now copies the row into variables of its
--   own (the caller's collation, as dlm_register_wait's arguments), and the
--   walk compares owners in the column's collation whoever calls it.
--
-- Rolling upgrade: the same signatures and grants; the same answers but
-- for graphs too large to walk within the bound (no cycle, as already past
-- 1,000 owners). Owner digests are hex, so their order is the same in every
-- collation. compatible_from = 4.

-- ----------------------------------------------------------- functions
-- Created with the harmless search_path pg_catalog, pg_temp and pinned to
-- this schema below, as in V3.

-- dlm_find_cycle (internal): the wait-for graph walked from a request of
-- p_owner (a digest) for p_key (its ancestors, descendant range and mode,
-- and its age p_my_at for the queue edges): the keys along a cycle back to
-- p_owner, starting with p_key, and the other owners on it; or '{}' and
-- '{}'. Breadth first, each owner once; a request of another owner that
-- its own hold blocks is not followed (that owner's wait ends at once).
-- Bounded whatever the graph: at most 1,000 owners, 10,000 edges and about
-- 100 ms (V13); past any of them the walk stops and answers '{}' (the wait
-- goes on and ends at its timeout). One snapshot (STABLE): the bound cuts
-- the walk short, it never mixes two states of the graph. Runs as its
-- caller (the schema owner).
CREATE OR REPLACE FUNCTION dlm_find_cycle(
    p_key text, p_ancestors text[], p_desc_begin text, p_desc_end text,
    p_shared boolean, p_my_at timestamptz, p_owner text, p_now timestamptz,
    OUT cycle text[], OUT owners text[])
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_owners text[] := '{}';
  v_parent integer[] := '{}';
  v_via    text[] := '{}';
  v_next   integer := 1;
  v_at     integer;
  v_cycle  text[];
  v_hop    record;
  v_edges  integer := 0;
  v_stop   timestamptz := clock_timestamp() + interval '100 milliseconds';
BEGIN
  cycle := '{}';
  owners := '{}';
  FOR v_hop IN
    SELECT DISTINCT b.owner_id
      FROM dlm_wait_blockers(p_key, p_ancestors, p_desc_begin, p_desc_end,
                             p_shared, p_my_at, p_owner, p_now) b
     ORDER BY b.owner_id
     LIMIT 1000
  LOOP
    -- The caller holds what blocks its own request: a cycle of one.
    IF v_hop.owner_id = p_owner THEN
      cycle := ARRAY[p_key];
      RETURN;
    END IF;
    v_owners := v_owners || v_hop.owner_id;
    v_parent := v_parent || 0;
    v_via := v_via || p_key;
  END LOOP;

  WHILE v_next <= cardinality(v_owners) AND v_next <= 1000 LOOP
    IF clock_timestamp() > v_stop THEN
      RETURN;
    END IF;
    -- The next owner's live requests and, for each, the owners it waits
    -- for. The owner is looked up in the column's collation (COLLATE
    -- "default"), so the owner index serves it whatever collation the
    -- caller's arguments gave this function's variables (V13).
    FOR v_hop IN
      SELECT e.resource, e.owner_id
        FROM (SELECT r.resource, b.owner_id,
                     bool_or(b.owner_id = r.owner_id)
                       OVER (PARTITION BY r.resource) AS self_blocked
                FROM dlm_lock_requests r
                CROSS JOIN LATERAL dlm_wait_blockers(
                  r.resource, r.ancestors, r.desc_begin, r.desc_end,
                  r.mode = 'SHARED', r.requested_at, r.owner_id, p_now) b
               WHERE r.owner_id = v_owners[v_next] COLLATE "default"
                 AND r.expires_at > p_now) e
       WHERE NOT e.self_blocked
       ORDER BY e.resource, e.owner_id
    LOOP
      IF v_hop.owner_id = p_owner THEN
        v_cycle := ARRAY[v_hop.resource];
        v_at := v_next;
        WHILE v_at > 0 LOOP
          v_cycle := v_via[v_at] || v_cycle;
          owners := owners || v_owners[v_at];
          v_at := v_parent[v_at];
        END LOOP;
        cycle := v_cycle;
        RETURN;
      END IF;
      v_edges := v_edges + 1;
      IF v_edges > 10000 OR clock_timestamp() > v_stop THEN
        RETURN;
      END IF;
      IF cardinality(v_owners) < 1000
         AND NOT (v_hop.owner_id = ANY (v_owners)) THEN
        v_owners := v_owners || v_hop.owner_id;
        v_parent := v_parent || v_next;
        v_via := v_via || v_hop.resource;
      END IF;
    END LOOP;
    v_next := v_next + 1;
  END LOOP;
END
$$;

COMMENT ON FUNCTION dlm_find_cycle(text, text[], text, text, boolean, timestamptz, text, timestamptz) IS 'dlm (internal): the wait-for graph walk, at most 1,000 owners, 10,000 edges and about 100 ms.';

-- dlm_wait_cycle: the wait-for graph walked again from p_owner's live
-- request for p_key, in a transaction of its own after dlm_register_wait
-- committed (so it sees every registration that committed before it): the
-- cycle (the request is then deleted), or '{}' (also when there is no such
-- request). The row is copied into variables first (V13): passed straight
-- from the row, its columns of collation "C" set the walk's collation and
-- the walk lost the owner index.
CREATE OR REPLACE FUNCTION dlm_wait_cycle(p_key text, p_owner text)
  RETURNS text[]
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  v_owner      text;
  v_now        timestamptz;
  v_ancestors  text[];
  v_desc_begin text;
  v_desc_end   text;
  v_shared     boolean;
  v_my_at      timestamptz;
BEGIN
  PERFORM dlm_client_for(p_key, false);
  v_owner := dlm_owner_digest(p_owner);
  v_now := clock_timestamp();
  SELECT r.ancestors, r.desc_begin, r.desc_end, r.mode = 'SHARED',
         r.requested_at
    INTO v_ancestors, v_desc_begin, v_desc_end, v_shared, v_my_at
    FROM dlm_lock_requests r
   WHERE r.resource = p_key AND r.owner_id = v_owner
     AND r.expires_at > v_now;
  IF NOT FOUND THEN
    RETURN '{}'::text[];
  END IF;
  RETURN dlm_confirmed_cycle(p_key, v_ancestors, v_desc_begin, v_desc_end,
                             v_shared, v_my_at, v_owner);
END
$$;

COMMENT ON FUNCTION dlm_wait_cycle(text, text) IS 'dlm (client): the wait-for graph walked again from a live request, after its registration committed.';

-- Both pinned to this schema as every dlm function is (V9's rule):
-- pg_catalog first, pg_temp last. CREATE OR REPLACE keeps their owner and
-- grants (dlm_wait_cycle: EXECUTE for the client role, V7).
DO $$
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  EXECUTE format('ALTER FUNCTION dlm_find_cycle(text, text[], text, text, boolean, timestamptz, text, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
  EXECUTE format('ALTER FUNCTION dlm_wait_cycle(text, text) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (13, 'cycle walk bounded in time', 4)
  ON CONFLICT (version) DO NOTHING;

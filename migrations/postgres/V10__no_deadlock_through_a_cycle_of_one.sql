-- dlm migration V10: no deadlock reported through another owner's own
-- cycle. Applied in one transaction after V9, in the same schema; records
-- version 10. Re-runnable.
--
-- - dlm_find_cycle no longer follows a request that its own owner's hold
--   blocks. Such a request is a cycle of one, and its owner's wait ends at
--   once: it is told DEADLOCK_DETECTED, or it finds that the hold is a
--   leftover of its own (an acquisition in doubt after a lost reply, a lazy
--   release a server crash undid) and releases it by token. Either way that
--   request is not something another owner can wait on forever. Before,
--   a second owner whose wait met such a request (right after a server
--   restart: the first owner's leftover in its way, the first owner's
--   request queued behind its own) was told DEADLOCK_DETECTED for a cycle
--   that was not one.
--
-- Rolling upgrade: one internal function replaced, same signature; every
-- library of schema 4 and later calls it through dlm_register_wait and
-- dlm_wait_cycle and gets the same answers, but for the false cycles above.
-- compatible_from = 4.

-- ----------------------------------------------------------- functions

-- dlm_find_cycle (internal): the wait-for graph walked from a request of
-- p_owner (a digest) for p_key (its ancestors, descendant range and mode,
-- and its age p_my_at for the queue edges): the keys along a cycle back to
-- p_owner, starting with p_key, and the other owners on it; or '{}' and
-- '{}'. Breadth first, each owner once; a request of another owner that
-- its own hold blocks is not followed (that owner's wait ends at once).
-- At most 1,000 owners are visited: past that the walk stops and answers
-- '{}' (the wait goes on and ends at its timeout), so its work is bounded
-- whatever the graph. Runs as its caller (the schema owner).
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
BEGIN
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
      owners := '{}';
      RETURN;
    END IF;
    v_owners := v_owners || v_hop.owner_id;
    v_parent := v_parent || 0;
    v_via := v_via || p_key;
  END LOOP;

  WHILE v_next <= cardinality(v_owners) AND v_next <= 1000 LOOP
    FOR v_hop IN
      SELECT e.resource, e.owner_id
        FROM (SELECT r.resource, b.owner_id,
                     bool_or(b.owner_id = r.owner_id)
                       OVER (PARTITION BY r.resource) AS self_blocked
                FROM dlm_lock_requests r
                CROSS JOIN LATERAL dlm_wait_blockers(
                  r.resource, r.ancestors, r.desc_begin, r.desc_end,
                  r.mode = 'SHARED', r.requested_at, r.owner_id, p_now) b
               WHERE r.owner_id = v_owners[v_next]
                 AND r.expires_at > p_now) e
       WHERE NOT e.self_blocked
       ORDER BY e.resource, e.owner_id
    LOOP
      IF v_hop.owner_id = p_owner THEN
        v_cycle := ARRAY[v_hop.resource];
        v_at := v_next;
        owners := '{}';
        WHILE v_at > 0 LOOP
          v_cycle := v_via[v_at] || v_cycle;
          owners := owners || v_owners[v_at];
          v_at := v_parent[v_at];
        END LOOP;
        cycle := v_cycle;
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
  cycle := '{}';
  owners := '{}';
END
$$;

-- Pinned to this schema as every dlm function is (V9's rule): pg_catalog
-- first, pg_temp last.
DO $$
BEGIN
  IF current_schema() IS NULL THEN
    RAISE EXCEPTION 'search_path names no existing schema to create dlm objects in';
  END IF;
  EXECUTE format('ALTER FUNCTION dlm_find_cycle(text, text[], text, text, boolean, timestamptz, text, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
                 current_schema());
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (10, 'no deadlock through a cycle of one', 4)
  ON CONFLICT (version) DO NOTHING;

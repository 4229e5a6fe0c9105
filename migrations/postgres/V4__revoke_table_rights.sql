-- dlm migration V4: the application role loses the table rights V1 gave it
-- (the last step of least privilege, V3). Applied in one transaction after
-- V3, in the same schema; records version 4. Re-runnable.
--
-- Why a migration of its own: V3 turned every dlm function into SECURITY
-- DEFINER. A call of the previous release that was already under way when
-- V3 committed may have looked its function up before (a session reads the
-- catalog changes only at its next transaction or lock), and then runs the
-- old SECURITY INVOKER body, with the caller's rights, after V3's commit:
-- for instance a call that was waiting for the table lock V3 held. Had V3
-- also revoked the table rights, that call would fail with "permission
-- denied" (seen in the mixed-fleet upgrade test). So V4 first waits until
-- no session is still running a dlm call it began before V4 began (at most
-- 2 s: such a call lasts milliseconds), and then revokes. The applying role
-- must be able to see other roles' sessions in pg_stat_activity (a
-- superuser, or a member of pg_read_all_stats), or it cannot wait for them
-- and says so.
--
-- Compatibility: the previous release's lock calls keep working (they run
-- the SECURITY DEFINER functions); its direct reads of dlm_locks and
-- dlm_schema_version (initialize, describe, listings) do not: the one
-- documented exception to the upgrade rule, for security (README, "For
-- DBAs").

DO $$
DECLARE
  v_waited_until timestamptz := clock_timestamp() + interval '2 seconds';
  v_left         integer;
BEGIN
  IF NOT (pg_has_role('pg_read_all_stats', 'USAGE')
          OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
    RAISE WARNING 'dlm V4: role % cannot see other roles'' sessions; not waiting for calls still running the functions of before V3', current_user;
    RETURN;
  END IF;
  LOOP
    -- pg_stat_activity is read once per transaction unless cleared.
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO v_left FROM pg_stat_activity a
     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
       AND a.backend_type = 'client backend' AND a.state = 'active'
       AND a.query_start < now() AND a.query LIKE '%dlm\_%';
    EXIT WHEN v_left = 0;
    IF clock_timestamp() > v_waited_until THEN
      RAISE WARNING 'dlm V4: % dlm call(s) begun before this migration still run after 2 s; revoking anyway', v_left;
      EXIT;
    END IF;
    PERFORM pg_sleep(0.02);
  END LOOP;
END
$$;

DO $$
DECLARE
  v_client  text := (SELECT value FROM dlm_config WHERE name = 'client_role');
  v_admin   text := (SELECT value FROM dlm_config WHERE name = 'admin_role');
  v_schema  text := current_schema();
  v_grantee text;
  v_rel     text;
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
    FOR v_rel IN
      SELECT c.relname FROM pg_class c
       WHERE c.relnamespace = v_schema::regnamespace AND c.relkind = 'r'
         AND c.relname LIKE 'dlm\_%'
    LOOP
      EXECUTE format('REVOKE ALL ON TABLE %I.%I FROM %s', v_schema, v_rel,
                     v_grantee);
    END LOOP;
    EXECUTE format('REVOKE ALL ON FUNCTION %I.dlm_notify_waiters(text, '
                   'text[], text, text) FROM %s', v_schema, v_grantee);
  END LOOP;
END
$$;

INSERT INTO dlm_schema_version (version, description, compatible_from)
  VALUES (4, 'revoke table rights', 2)
  ON CONFLICT (version) DO NOTHING;

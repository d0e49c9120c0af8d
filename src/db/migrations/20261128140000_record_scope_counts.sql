-- The live records of each scope, kept as they change (issue 31): a run's last step counted them
-- (count(*) over every live record of the connection and model, 19 ms at 90,000 records and 103 ms at
-- 900,000: bench/recordCount.ts, docs/operations.md "A run's count of records"), however few records
-- the run itself touched.
--
-- `record_scopes.live_records` is the count, or NULL when it is not known: the next countRecords counts
-- the records once, under the scope's lock, and stores the count (src/records/postgresRecordStore.ts).
-- Every scope starts NULL here, so this migration reads no record.
--
-- The writers of this version keep the count themselves, under the scope's lock they already hold
-- (records_save_page below; deleteRecords, markUnseenDeleted, eraseSync in the store), and announce it
-- with the transaction-local setting `service.counts_kept`. Any other writer of `records` (a worker of
-- the previous version during a rolling upgrade, its records_save functions, a statement typed by an
-- operator) fires the triggers below, which lock the scope's row and make its count unknown, so that
-- it is counted again when next asked, after that writer commits. A count is either right or NULL. The
-- triggers' WHEN is false for the writers that announce themselves: for them a trigger costs the test
-- of one setting per row, and no row is copied.
--
-- Its locks: `record_scopes` exclusively (every read and write of records waits), then `records`
-- against writes, for as long as writes of records already under way take to end. At most 10 s: then
-- the migration fails (`lock timeout`), the process that ran it stops naming it, and starting it again
-- tries again.
SET LOCAL lock_timeout = '10s';

ALTER TABLE record_scopes ADD COLUMN live_records bigint;

CREATE FUNCTION record_scope_count_unknown() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_scopes bigint[];
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    UPDATE record_scopes SET live_records = NULL WHERE live_records IS NOT NULL;
    RETURN NULL;
  END IF;
  v_scopes := CASE TG_OP WHEN 'INSERT' THEN ARRAY[NEW.scope_id] WHEN 'DELETE' THEN ARRAY[OLD.scope_id]
                         ELSE ARRAY[OLD.scope_id, NEW.scope_id] END;
  -- The lock whatever the count: a count made while this writer's transaction is open waits for it.
  PERFORM 1 FROM record_scopes WHERE scope_id = ANY(v_scopes) ORDER BY scope_id FOR NO KEY UPDATE;
  UPDATE record_scopes SET live_records = NULL WHERE scope_id = ANY(v_scopes) AND live_records IS NOT NULL;
  RETURN NULL;
END;
$$;

CREATE TRIGGER record_scope_count_insert AFTER INSERT ON records FOR EACH ROW
  WHEN (current_setting('service.counts_kept', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION record_scope_count_unknown();
CREATE TRIGGER record_scope_count_update AFTER UPDATE OF deleted_at, scope_id ON records FOR EACH ROW
  WHEN (current_setting('service.counts_kept', true) IS DISTINCT FROM 'on'
        AND ((OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL) OR OLD.scope_id <> NEW.scope_id))
  EXECUTE FUNCTION record_scope_count_unknown();
CREATE TRIGGER record_scope_count_delete AFTER DELETE ON records FOR EACH ROW
  WHEN (current_setting('service.counts_kept', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION record_scope_count_unknown();
CREATE TRIGGER record_scope_count_truncate AFTER TRUNCATE ON records FOR EACH STATEMENT
  EXECUTE FUNCTION record_scope_count_unknown();

-- records_save_page (20261127160000), the same but for the count: it announces itself, a scope it
-- creates starts at 0, and what it adds is added to the count.
CREATE OR REPLACE FUNCTION records_save_page(
  p_environment text, p_integration text, p_connection text, p_model text, p_sync text, p_run text,
  p_step_run text, p_step integer, p_at timestamptz,
  p_ids text[], p_hashes uuid[], p_data json,
  p_earlier_steps integer[] DEFAULT NULL, p_earlier_outcomes text[] DEFAULT NULL
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_scope bigint;
  v_owner text;
  v_at timestamptz;
  v_result jsonb;
  v_added bigint;
  v_updated bigint;
  v_unchanged bigint;
BEGIN
  -- This writer keeps the scope's count itself (below): the triggers stay quiet for its statements.
  PERFORM set_config('service.counts_kept', 'on', true);
  IF p_step_run IS NOT NULL AND p_earlier_steps IS NOT NULL THEN
    INSERT INTO script_steps (run_id, step, outcome)
    SELECT p_step_run, u.s, u.o FROM unnest(p_earlier_steps, p_earlier_outcomes) AS u(s, o)
    ON CONFLICT (run_id, step) DO NOTHING;
  END IF;

  IF p_step_run IS NOT NULL THEN
    INSERT INTO script_steps (run_id, step) VALUES (p_step_run, p_step) ON CONFLICT (run_id, step) DO NOTHING;
    IF NOT FOUND THEN
      SELECT result INTO v_result FROM script_steps WHERE run_id = p_step_run AND step = p_step;
      RETURN v_result;
    END IF;
  END IF;

  -- FOR SHARE: batches of the owning run proceed together; beginRun (an update) waits for them.
  SELECT run_id INTO v_owner FROM record_sync_runs
   WHERE environment_id = p_environment AND integration_id = p_integration
     AND connection_id = p_connection AND sync_name = p_sync
   FOR SHARE;
  IF FOUND AND v_owner <> p_run THEN
    RAISE EXCEPTION 'run % may no longer write records of sync %', p_run, p_sync
      USING ERRCODE = 'SV001', DETAIL = v_owner;
  END IF;

  FOR attempt IN 1..5 LOOP
    SELECT scope_id INTO v_scope FROM record_scopes
     WHERE environment_id = p_environment AND integration_id = p_integration
       AND connection_id = p_connection AND model = p_model
     FOR UPDATE;
    EXIT WHEN FOUND;
    -- A concurrent erase may delete the row between the insert attempt and the lock: try again.
    INSERT INTO record_scopes (environment_id, integration_id, connection_id, model, live_records)
    VALUES (p_environment, p_integration, p_connection, p_model, 0)
    ON CONFLICT DO NOTHING RETURNING scope_id INTO v_scope;
    EXIT WHEN v_scope IS NOT NULL;
  END LOOP;
  IF v_scope IS NULL THEN
    RAISE EXCEPTION 'could not lock the records of this connection and model' USING ERRCODE = 'SV002';
  END IF;

  INSERT INTO record_scope_syncs (scope_id, sync_name) VALUES (v_scope, p_sync) ON CONFLICT DO NOTHING;
  v_at := coalesce(p_at, clock_timestamp());

  WITH given AS (
    SELECT u.id, u.h, d.d, u.n
    FROM unnest(p_ids, p_hashes) WITH ORDINALITY AS u(id, h, n)
    JOIN json_array_elements(p_data) WITH ORDINALITY AS d(d, n) USING (n)
  ),
  known AS (
    SELECT g.id, g.h, g.d, g.n, r.stored IS NOT NULL AS stored, coalesce(r.was_deleted, false) AS was_deleted,
           r.data_hash = g.h AS same
    FROM given g
    LEFT JOIN LATERAL (
      SELECT true AS stored, r.deleted_at IS NOT NULL AS was_deleted, r.data_hash
      FROM records r WHERE r.scope_id = v_scope AND r.id = g.id OFFSET 0
    ) r ON true
  ),
  inserted AS (
    INSERT INTO records (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id)
    SELECT v_scope, k.id, k.d, k.h, p_sync, v_at, v_at, 'ADDED', p_run
    FROM known k WHERE NOT k.stored ORDER BY k.n
    RETURNING 1
  ),
  rewritten AS (
    UPDATE records r SET data = k.d, data_hash = k.h, sync_name = p_sync, last_modified_at = v_at,
           last_action = CASE WHEN r.deleted_at IS NULL THEN 'UPDATED' ELSE 'ADDED' END,
           deleted_at = NULL, last_run_id = p_run, position = nextval('record_positions')
    FROM known k
    WHERE k.stored AND (k.was_deleted OR NOT k.same) AND r.scope_id = v_scope AND r.id = k.id
    RETURNING k.was_deleted
  ),
  stamped AS (
    UPDATE records r SET last_run_id = p_run, sync_name = p_sync
    FROM known k
    WHERE k.stored AND NOT k.was_deleted AND k.same AND r.scope_id = v_scope AND r.id = k.id
      AND (r.last_run_id <> p_run OR r.sync_name <> p_sync)
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM inserted) + (SELECT count(*) FROM rewritten WHERE was_deleted),
         (SELECT count(*) FROM rewritten WHERE NOT was_deleted),
         (SELECT count(*) FROM known WHERE stored AND NOT was_deleted AND same)
    INTO v_added, v_updated, v_unchanged;

  -- Added and deleted ones saved again are live now; updated and unchanged ones were already.
  IF v_added > 0 THEN
    UPDATE record_scopes SET live_records = live_records + v_added
     WHERE scope_id = v_scope AND live_records IS NOT NULL;
  END IF;

  v_result := jsonb_build_object('added', v_added, 'updated', v_updated, 'deleted', 0,
                                 'unchanged', v_unchanged, 'at', v_at);
  IF p_step_run IS NOT NULL THEN
    UPDATE script_steps SET result = v_result - 'at' WHERE run_id = p_step_run AND step = p_step;
  END IF;
  RETURN v_result;
END;
$$;

SET LOCAL lock_timeout TO DEFAULT;

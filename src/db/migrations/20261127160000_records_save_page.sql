-- records_save_page: records_save (20261127050000) with the batch as one JSON array and the lookup of
-- each given record by its key (issue 31, pages of 1000: docs/operations.md "Sync pages of 1000").
-- Same rules, same lock order, same result; what changed:
-- - p_data is one `json` array of the records' canonical JSON texts (the caller joins them), instead
--   of a text[]: no array literal to escape on the client and to parse on the server, and each
--   record's text is taken verbatim from it (json_array_elements on `json` returns the text as given,
--   so the stored text and its hash are what they were);
-- - each given record is looked up by (scope, id) through the primary key (the LATERAL … OFFSET 0
--   keeps the planner from turning it into a hash join over the whole scope, which it chose for a
--   scope of unknown size and whose cost grew with the scope: 9,000 rows read for a batch of 1000).
-- records_save stays for workers of the previous version during a rolling upgrade.
CREATE FUNCTION records_save_page(
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
    INSERT INTO record_scopes (environment_id, integration_id, connection_id, model)
    VALUES (p_environment, p_integration, p_connection, p_model)
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

  v_result := jsonb_build_object('added', v_added, 'updated', v_updated, 'deleted', 0,
                                 'unchanged', v_unchanged, 'at', v_at);
  IF p_step_run IS NOT NULL THEN
    UPDATE script_steps SET result = v_result - 'at' WHERE run_id = p_step_run AND step = p_step;
  END IF;
  RETURN v_result;
END;
$$;

-- A move copies an org before its write fence and catches up, while fenced, what changed since (retentionctl org
-- move, docs/scaling.md "Moving an org between cells"): a step for the copy made before the fence, the way the
-- org's audit chain on the target catches up with the source's, and the way a move aborted before its switch
-- removes the target's copy of the chain.

ALTER TABLE org_moves DROP CONSTRAINT org_moves_step_check,
    ADD CONSTRAINT org_moves_step_check
    CHECK (step IN ('draining', 'precopied', 'fenced', 'copied', 'verified', 'switched', 'done'));

-- audit_move_catch_up brings the chain of an org copied into this cell before its fence (org_moves step
-- 'precopied') to the source's state at the fence: it removes the copied events the source's audit retention has
-- removed since (those before p_first_kept, the source's lowest seq; a purge removes only a prefix), sets the head
-- and anchor to the source's, and replaces the purge records. It returns the highest seq the target still holds, so
-- that the mover copies the events after it. The events themselves stay append-only: the copied ones are the
-- source's, which no one may change.
CREATE FUNCTION audit_move_catch_up(p_org text, p_chain jsonb, p_purges jsonb, p_first_kept bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_kept bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM org_moves m WHERE m.org_id = p_org AND m.role = 'target' AND m.step = 'precopied') THEN
        RAISE EXCEPTION 'audit_move_catch_up: org % has no copy made before its fence in this cell', p_org;
    END IF;
    IF p_chain IS NULL THEN
        RAISE EXCEPTION 'audit_move_catch_up: org % has no audit chain on the source', p_org;
    END IF;
    PERFORM set_config('retention.audit_purge', 'on', true);
    DELETE FROM audit_events e WHERE e.org_id = p_org AND e.seq < p_first_kept;
    PERFORM set_config('retention.audit_purge', 'off', true);
    INSERT INTO audit_chains (org_id, seq, head_hash, anchor_seq, anchor_hash, updated_at)
    VALUES (p_org, (p_chain->>'seq')::bigint, p_chain->>'head_hash', (p_chain->>'anchor_seq')::bigint,
            p_chain->>'anchor_hash', (p_chain->>'updated_at')::timestamptz)
    ON CONFLICT (org_id) DO UPDATE SET seq = EXCLUDED.seq, head_hash = EXCLUDED.head_hash,
        anchor_seq = EXCLUDED.anchor_seq, anchor_hash = EXCLUDED.anchor_hash, updated_at = EXCLUDED.updated_at;
    DELETE FROM audit_purges p WHERE p.org_id = p_org;
    INSERT INTO audit_purges (org_id, sandbox_name, removed, purged_before, first_kept_seq, anchor_hash, purged_at)
    SELECT p_org, p.sandbox_name, p.removed, p.purged_before, p.first_kept_seq, p.anchor_hash, p.purged_at
    FROM jsonb_to_recordset(coalesce(p_purges, '[]')) AS p (sandbox_name text, removed bigint, purged_before timestamptz,
                                                           first_kept_seq bigint, anchor_hash text, purged_at timestamptz);
    SELECT coalesce(max(e.seq), 0) INTO v_kept FROM audit_events e WHERE e.org_id = p_org;
    RETURN v_kept;
END $$;

ALTER FUNCTION audit_move_catch_up(text, jsonb, jsonb, bigint) OWNER TO retention_owner;
REVOKE ALL ON FUNCTION audit_move_catch_up(text, jsonb, jsonb, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_move_catch_up(text, jsonb, jsonb, bigint) TO retention_app;

-- audit_move_abort removes the chain of an org copied into this cell by a move that is being aborted before its
-- switch (retentionctl org move -abort): the copy's events, head and purge records. The source keeps the chain.
CREATE FUNCTION audit_move_abort(p_org text, p_move uuid) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_removed bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM org_moves m WHERE m.id = p_move AND m.org_id = p_org AND m.role = 'target'
                   AND m.step IN ('precopied', 'copied', 'verified')) THEN
        RAISE EXCEPTION 'audit_move_abort: org % has no copy of move % in this cell to drop', p_org, p_move;
    END IF;
    PERFORM set_config('retention.audit_purge', 'on', true);
    DELETE FROM audit_events e WHERE e.org_id = p_org;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    PERFORM set_config('retention.audit_purge', 'off', true);
    DELETE FROM audit_chains c WHERE c.org_id = p_org;
    DELETE FROM audit_purges p WHERE p.org_id = p_org;
    RETURN v_removed;
END $$;

ALTER FUNCTION audit_move_abort(text, uuid) OWNER TO retention_owner;
REVOKE ALL ON FUNCTION audit_move_abort(text, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_move_abort(text, uuid) TO retention_app;

-- Moving an org between cells (retentionctl org move, docs/scaling.md): the move's state, kept on both cells so a
-- move killed at any point resumes from its last committed step, and the per-org write fence the service checks in
-- every writing transaction.

-- One row per move and side: on the source ('source'), from the fence to the removal of the org; on the target
-- ('target'), written by the copy's own transaction, so a copy is there whole with its row or not at all.
CREATE TABLE org_moves (
    id          uuid        NOT NULL,
    org_id      text        NOT NULL,
    role        text        NOT NULL CHECK (role IN ('source', 'target')),
    target_cell text        NOT NULL,
    step        text        NOT NULL CHECK (step IN ('draining', 'fenced', 'copied', 'verified', 'switched', 'done')),
    counts      jsonb       NOT NULL DEFAULT '{}',
    started_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (id, role)
);
-- At most one open move of an org on each side.
CREATE UNIQUE INDEX org_moves_open_key ON org_moves (org_id, role) WHERE step <> 'done';
COMMENT ON TABLE org_moves IS 'moves of orgs between cells and the step each reached (retentionctl org move)';

-- The write fence: while an org has a row here in state 'fenced' (its copy is being made) or 'moved' (it lives in
-- another cell now), every transaction that writes anything of the org refuses (503, Retry-After). In 'draining',
-- writes pass but no new retention run lists the org's datasets, so the runs in flight can end first.
CREATE TABLE org_write_fences (
    org_id  text        PRIMARY KEY,
    move_id uuid        NOT NULL,
    state   text        NOT NULL CHECK (state IN ('draining', 'fenced', 'moved')),
    since   timestamptz NOT NULL
);
COMMENT ON TABLE org_write_fences IS 'orgs whose writes are refused while they move (fenced) or since they moved away (moved)';

-- org_write_fence is called by every writing transaction of an org (postgres.checkWriteFence) and returns the
-- fence's state when writes are refused, NULL when they pass. It first takes the org's fence lock shared, which the
-- mover takes exclusive to raise the fence: raising it waits for every writing transaction that passed this check
-- to commit (so an acknowledged write is in the copy made after), and a transaction that takes the lock after it
-- sees the fence. plpgsql takes a new snapshot for each statement (read committed), so the check after the lock
-- sees a fence committed while it waited.
CREATE FUNCTION org_write_fence(p_org text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_state text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(18, hashtext(p_org));
    SELECT f.state INTO v_state FROM org_write_fences f WHERE f.org_id = p_org AND f.state <> 'draining';
    RETURN v_state;
END $$;

-- The audit objects are retention_owner's and append-only; an org's chain enters a cell only through
-- audit_move_in (its head and anchor, and the purge records, which the service's role may not write) and leaves it
-- only through audit_move_out, once its move has switched the org's route to the target.
CREATE FUNCTION audit_move_in(p_org text, p_chain jsonb, p_purges jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM org_moves m WHERE m.org_id = p_org AND m.role = 'target' AND m.step <> 'done') THEN
        RAISE EXCEPTION 'audit_move_in: org % has no move into this cell', p_org;
    END IF;
    IF EXISTS (SELECT 1 FROM audit_chains c WHERE c.org_id = p_org) THEN
        RAISE EXCEPTION 'audit_move_in: org % already has an audit chain here', p_org;
    END IF;
    IF p_chain IS NOT NULL THEN
        INSERT INTO audit_chains (org_id, seq, head_hash, anchor_seq, anchor_hash, updated_at)
        VALUES (p_org, (p_chain->>'seq')::bigint, p_chain->>'head_hash', (p_chain->>'anchor_seq')::bigint,
                p_chain->>'anchor_hash', (p_chain->>'updated_at')::timestamptz);
    END IF;
    INSERT INTO audit_purges (org_id, sandbox_name, removed, purged_before, first_kept_seq, anchor_hash, purged_at)
    SELECT p_org, p.sandbox_name, p.removed, p.purged_before, p.first_kept_seq, p.anchor_hash, p.purged_at
    FROM jsonb_to_recordset(coalesce(p_purges, '[]')) AS p (sandbox_name text, removed bigint, purged_before timestamptz,
                                                           first_kept_seq bigint, anchor_hash text, purged_at timestamptz);
END $$;

CREATE FUNCTION audit_move_out(p_org text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_removed bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM org_moves m WHERE m.org_id = p_org AND m.role = 'source' AND m.step = 'switched') THEN
        RAISE EXCEPTION 'audit_move_out: org % has no move switched to another cell', p_org;
    END IF;
    PERFORM set_config('retention.audit_purge', 'on', true);
    DELETE FROM audit_events e WHERE e.org_id = p_org;
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    PERFORM set_config('retention.audit_purge', 'off', true);
    DELETE FROM audit_chains c WHERE c.org_id = p_org;
    DELETE FROM audit_purges p WHERE p.org_id = p_org;
    RETURN v_removed;
END $$;

GRANT SELECT ON org_moves TO retention_owner;
ALTER FUNCTION audit_move_in(text, jsonb, jsonb) OWNER TO retention_owner;
ALTER FUNCTION audit_move_out(text) OWNER TO retention_owner;
REVOKE ALL ON FUNCTION audit_move_in(text, jsonb, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION audit_move_out(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit_move_in(text, jsonb, jsonb) TO retention_app;
GRANT EXECUTE ON FUNCTION audit_move_out(text) TO retention_app;
GRANT ALL ON org_moves, org_write_fences TO retention_app;

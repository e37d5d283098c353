DROP FUNCTION audit_move_abort(text, uuid);
DROP FUNCTION audit_move_catch_up(text, jsonb, jsonb, bigint);
-- A move copied before its fence resumes, under the earlier schema, from its first step.
UPDATE org_moves SET step = 'draining' WHERE step = 'precopied' AND role = 'source';
DELETE FROM org_moves WHERE step = 'precopied' AND role = 'target';
ALTER TABLE org_moves DROP CONSTRAINT org_moves_step_check,
    ADD CONSTRAINT org_moves_step_check CHECK (step IN ('draining', 'fenced', 'copied', 'verified', 'switched', 'done'));

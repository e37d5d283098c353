DROP FUNCTION audit_move_out(text);
DROP FUNCTION audit_move_in(text, jsonb, jsonb);
DROP FUNCTION org_write_fence(text);
DROP TABLE org_write_fences;
DROP TABLE org_moves;

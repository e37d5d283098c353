-- Reverts 0004_audit. The roles stay: they are cluster-wide and other databases of the cluster may use them.

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM retention_app;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM retention_app;
REVOKE ALL ON SCHEMA public FROM retention_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM retention_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM retention_app;
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.oid IN ('lake_rows'::regclass, 'profile_rows'::regclass)
           OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent IN ('lake_rows'::regclass, 'profile_rows'::regclass))
    LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO CURRENT_USER', t);
    END LOOP;
END $$;

DROP FUNCTION audit_purge(text, timestamptz, bigint);
DROP TRIGGER audit_events_no_truncate ON audit_events;
DROP TRIGGER audit_events_no_change ON audit_events;
DROP FUNCTION audit_events_append_only();
ALTER TABLE audit_events OWNER TO CURRENT_USER;

DROP TABLE audit_purges;
DROP TABLE audit_chains;

ALTER TABLE audit_events RESET (autovacuum_vacuum_insert_threshold, autovacuum_vacuum_insert_scale_factor);
DROP INDEX audit_events_asset_idx;
CREATE INDEX audit_events_asset_idx ON audit_events (org_id, asset_id, occurred_at DESC);
DROP INDEX audit_events_scope_time_idx;
CREATE INDEX audit_events_scope_time_idx ON audit_events (org_id, sandbox_name, occurred_at DESC, id);
DROP INDEX audit_events_request_idx;
DROP INDEX audit_events_asset_name_idx;
DROP INDEX audit_events_user_idx;
DROP INDEX audit_events_status_idx;
DROP INDEX audit_events_asset_type_idx;
DROP INDEX audit_events_action_idx;
DROP INDEX audit_events_chain_key;
ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_hash_pair,
    DROP COLUMN hash,
    DROP COLUMN prev_hash,
    DROP COLUMN seq;

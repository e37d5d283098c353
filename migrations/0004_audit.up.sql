-- Audit log integrity: per-org hash chains over audit_events, append-only enforcement in Postgres, the audit log's
-- own retention, and indexes for the Audit Query API's filters.
--
-- Role layout (roles are cluster-wide, so they are created once and idempotently: many databases of one cluster run
-- this migration, tests at the same moment):
--   retention_owner  NOLOGIN. Owns audit_events, audit_chains, audit_purges and the functions below. Nobody logs in
--                    as it; it only acts through audit_purge, a SECURITY DEFINER function.
--   retention_app    LOGIN, no password (set one: ALTER ROLE retention_app PASSWORD '…'). The service's role: every
--                    privilege on the service's other tables, INSERT and SELECT on audit_events, and only the
--                    chain-head columns it advances. It cannot UPDATE, DELETE or TRUNCATE an audit event.
-- Migrations run as a superuser (they create roles and hand tables to retention_owner); retentiond then runs with a
-- DATABASE_URL that logs in as retention_app. In tests everything connects as the superuser, which the triggers
-- still stop.

DO $$
BEGIN
    -- Two databases migrating at once may both find a role missing; the loser of the race gets unique_violation.
    BEGIN
        CREATE ROLE retention_owner NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE retention_app LOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
END $$;

-- The chain: seq numbers an org's events 1, 2, 3…; hash is the SHA-256 (hex) of the event's canonical content, which
-- includes seq and prev_hash, the hash of the org's previous event (audit.Event.Canonical defines the content).
ALTER TABLE audit_events
    ADD COLUMN seq       bigint,
    ADD COLUMN prev_hash text,
    ADD COLUMN hash      text;

-- Events written before chaining existed get sequence numbers but no hashes; the anchor below starts each org's
-- chain after them, so verification covers every event written from now on.
WITH numbered AS (
    SELECT id, row_number() OVER (PARTITION BY org_id ORDER BY occurred_at, id) AS n FROM audit_events
)
UPDATE audit_events e SET seq = numbered.n FROM numbered WHERE e.id = numbered.id;

ALTER TABLE audit_events
    ALTER COLUMN seq SET NOT NULL,
    ADD CONSTRAINT audit_events_hash_pair CHECK ((hash IS NULL) = (prev_hash IS NULL));
CREATE UNIQUE INDEX audit_events_chain_key ON audit_events (org_id, seq);

-- One row per org: the chain's head (the newest event's seq and hash) and its anchor (the point verification starts
-- from). Writers lock their org's row FOR UPDATE while they append, so only writers of the same org wait for each
-- other. The head is kept apart from the events so that a removed tail shows: the events would end before the head.
CREATE TABLE audit_chains (
    org_id      text        PRIMARY KEY,
    seq         bigint      NOT NULL CHECK (seq >= 0),
    head_hash   text        NOT NULL,
    anchor_seq  bigint      NOT NULL DEFAULT 0 CHECK (anchor_seq >= 0 AND anchor_seq <= seq),
    anchor_hash text        NOT NULL DEFAULT '0000000000000000000000000000000000000000000000000000000000000000',
    updated_at  timestamptz NOT NULL
);
COMMENT ON COLUMN audit_chains.seq IS 'seq of the newest event; 0 before the first';
COMMENT ON COLUMN audit_chains.anchor_seq IS 'events up to this seq were removed by the audit retention or predate chaining';
COMMENT ON COLUMN audit_chains.anchor_hash IS 'the prev_hash event anchor_seq + 1 must carry';

INSERT INTO audit_chains (org_id, seq, head_hash, anchor_seq, updated_at)
SELECT org_id, max(seq), '0000000000000000000000000000000000000000000000000000000000000000', max(seq), now()
FROM audit_events GROUP BY org_id;

-- What the audit retention removed, written by audit_purge itself, so the service cannot skip the record. The
-- service also appends a chained event per sandbox (Delete of assetType AuditLog) that the Audit Query API shows.
CREATE TABLE audit_purges (
    id             bigserial   PRIMARY KEY,
    org_id         text        NOT NULL,
    sandbox_name   text        NOT NULL,
    removed        bigint      NOT NULL,
    purged_before  timestamptz NOT NULL,
    first_kept_seq bigint      NOT NULL,
    anchor_hash    text        NOT NULL,
    purged_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_purges_org_idx ON audit_purges (org_id, purged_at);

-- Indexes for the Audit Query API: each filter leads with the scope, then the filtered column, then the default
-- order (newest first) with the id as tie-breaker, so a filtered page is an ordered index range, not a sort. Each
-- also carries action, asset_type and status, the columns filters most often combine with (user==…&action==…):
-- the page's ids are then found in the index alone, without reading an event that another filter rejects, and
-- a capped count is an index-only scan. action, assetType and status match case-insensitively, as Adobe's examples
-- (action==create) expect.
DROP INDEX audit_events_scope_time_idx;
CREATE INDEX audit_events_scope_time_idx ON audit_events (org_id, sandbox_name, occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
CREATE INDEX audit_events_action_idx ON audit_events (org_id, sandbox_name, lower(action), occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
CREATE INDEX audit_events_asset_type_idx ON audit_events (org_id, sandbox_name, lower(asset_type), occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
CREATE INDEX audit_events_status_idx ON audit_events (org_id, sandbox_name, lower(status), occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
CREATE INDEX audit_events_user_idx ON audit_events (org_id, sandbox_name, user_id, occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
CREATE INDEX audit_events_asset_name_idx ON audit_events (org_id, sandbox_name, asset_name, occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
CREATE INDEX audit_events_request_idx ON audit_events (org_id, sandbox_name, request_id, occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
DROP INDEX audit_events_asset_idx;
CREATE INDEX audit_events_asset_idx ON audit_events (org_id, sandbox_name, asset_id, occurred_at DESC, id)
    INCLUDE (action, asset_type, status);
-- Index-only scans need the visibility map; the table only grows, so vacuum it after every 10,000 new events
-- rather than after 20% of the table, or the newest events (those most read) would stay unmarked longest.
ALTER TABLE audit_events SET (autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_insert_scale_factor = 0.01);

-- Append-only, backing up the privileges: even a role that may write the table (its owner, a superuser) cannot
-- UPDATE or TRUNCATE events, nor DELETE them outside audit_purge.
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_user = 'retention_owner'
        AND current_setting('retention.audit_purge', true) = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit_events is append-only: % is not allowed', TG_OP
        USING HINT = 'old events leave only through the audit retention (audit_purge)';
END $$;
CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- audit_purge removes the oldest events of an org, those written before p_before, at most p_max of them, and moves
-- the org's anchor to the first kept event (its prev_hash becomes anchor_hash), so the rest stays verifiable. Only
-- a prefix of the chain (by seq) is ever removed: an event older than p_before that follows a newer one stays. It
-- refuses cutoffs within 30 days of now, so that the service's role cannot empty the log through it. It returns
-- what it removed per sandbox and records the same in audit_purges.
CREATE FUNCTION audit_purge(p_org text, p_before timestamptz, p_max bigint)
RETURNS TABLE (sandbox_name text, removed bigint, first_kept_seq bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_head   audit_chains%ROWTYPE;
    v_lowest bigint;
    v_first  bigint;
    v_anchor text;
BEGIN
    IF p_before > now() - interval '30 days' THEN
        RAISE EXCEPTION 'audit_purge: cutoff % is within 30 days of now', p_before;
    END IF;
    IF p_max < 1 THEN
        RAISE EXCEPTION 'audit_purge: p_max must be positive';
    END IF;
    SELECT * INTO v_head FROM audit_chains c WHERE c.org_id = p_org FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT e.seq INTO v_lowest FROM audit_events e WHERE e.org_id = p_org ORDER BY e.seq LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT e.seq INTO v_first FROM audit_events e
    WHERE e.org_id = p_org AND e.occurred_at >= p_before ORDER BY e.seq LIMIT 1;
    IF NOT FOUND THEN
        v_first := v_head.seq + 1;
    END IF;
    v_first := LEAST(v_first, v_lowest + p_max);
    IF v_first <= v_lowest THEN
        RETURN;
    END IF;

    IF v_first - 1 > v_head.anchor_seq THEN
        IF v_first = v_head.seq + 1 THEN
            v_anchor := v_head.head_hash;
        ELSE
            SELECT e.prev_hash INTO v_anchor FROM audit_events e WHERE e.org_id = p_org AND e.seq = v_first;
            IF v_anchor IS NULL THEN
                RAISE EXCEPTION 'audit_purge: event % of org % is missing or unchained; verify the chain', v_first, p_org;
            END IF;
        END IF;
        UPDATE audit_chains c SET anchor_seq = v_first - 1, anchor_hash = v_anchor WHERE c.org_id = p_org;
    ELSE
        v_anchor := v_head.anchor_hash;
    END IF;

    PERFORM set_config('retention.audit_purge', 'on', true);
    RETURN QUERY
    WITH gone AS (
        DELETE FROM audit_events e WHERE e.org_id = p_org AND e.seq < v_first RETURNING e.sandbox_name
    ), counted AS (
        SELECT g.sandbox_name, count(*)::bigint AS n FROM gone g GROUP BY g.sandbox_name
    ), recorded AS (
        INSERT INTO audit_purges (org_id, sandbox_name, removed, purged_before, first_kept_seq, anchor_hash)
        SELECT p_org, counted.sandbox_name, counted.n, p_before, v_first, v_anchor FROM counted
        RETURNING audit_purges.sandbox_name, audit_purges.removed
    )
    SELECT r.sandbox_name, r.removed, v_first FROM recorded r ORDER BY r.sandbox_name;
    PERFORM set_config('retention.audit_purge', 'off', true);
END $$;

-- Ownership and privileges. The audit objects go to retention_owner; the service's role gets what it needs and no
-- more on them.
ALTER TABLE audit_events OWNER TO retention_owner;
ALTER TABLE audit_chains OWNER TO retention_owner;
ALTER TABLE audit_purges OWNER TO retention_owner;
ALTER FUNCTION audit_events_append_only() OWNER TO retention_owner;
ALTER FUNCTION audit_purge(text, timestamptz, bigint) OWNER TO retention_owner;
REVOKE ALL ON FUNCTION audit_purge(text, timestamptz, bigint) FROM PUBLIC;

-- The service's role on the rest of the schema: every table and sequence there now, and (through default
-- privileges) those later migrations create. CREATE on the schema and ownership of the two partitioned row tables
-- let it create and drop row partitions, which needs the parent's owner.
GRANT USAGE, CREATE ON SCHEMA public TO retention_app;
GRANT ALL ON ALL TABLES IN SCHEMA public TO retention_app;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO retention_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO retention_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON SEQUENCES TO retention_app;
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.oid IN ('lake_rows'::regclass, 'profile_rows'::regclass)
           OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent IN ('lake_rows'::regclass, 'profile_rows'::regclass))
    LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO retention_app', t);
    END LOOP;
END $$;

-- …and on the audit objects only this: read and append events, read the chains and advance a head (the anchor
-- columns move only through audit_purge), read the purge records, run the audit retention.
REVOKE ALL ON audit_events, audit_chains, audit_purges FROM retention_app;
REVOKE ALL ON SEQUENCE audit_purges_id_seq FROM retention_app;
GRANT SELECT, INSERT ON audit_events TO retention_app;
GRANT SELECT ON audit_chains TO retention_app;
GRANT INSERT (org_id, seq, head_hash, updated_at), UPDATE (seq, head_hash, updated_at) ON audit_chains TO retention_app;
GRANT SELECT ON audit_purges TO retention_app;
GRANT EXECUTE ON FUNCTION audit_purge(text, timestamptz, bigint) TO retention_app;

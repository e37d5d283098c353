-- Record-delete work orders (Adobe's Data Hygiene /workorder): the identities each row carries, indexed so that an
-- order finds a person's rows through an index in each partition, never by reading payloads; the orders; and each
-- order's part per dataset.

-- A row's identity keys (catalog.IdentityKey: lowercased namespace code, ':', the value, lowercased for email), from
-- its identityMap; NULL for a row without identities. A GIN index per partition (created with each partition, as
-- the parent's indexes are) answers `identities && $keys`.
ALTER TABLE lake_rows ADD COLUMN identities text[];
ALTER TABLE profile_rows ADD COLUMN identities text[];
CREATE INDEX lake_rows_identities_idx ON lake_rows USING gin (identities);
CREATE INDEX profile_rows_identities_idx ON profile_rows USING gin (identities);

CREATE TABLE workorders (
    id             text        PRIMARY KEY, -- DI-<uuid>
    org_id         text        NOT NULL,
    sandbox_name   text        NOT NULL,
    dataset_id     text        NOT NULL, -- a dataset id, or ALL
    display_name   text        NOT NULL,
    description    text        NOT NULL DEFAULT '',
    status         text        NOT NULL CHECK (status IN ('received', 'validated', 'submitted', 'ingested', 'completed', 'failed')),
    reason         text,
    identity_count integer     NOT NULL CHECK (identity_count > 0),
    -- The identity keys while the order is open; emptied when it completes or fails, so that the service keeps no
    -- list of the people it erased (the audit events keep their count and keyed hashes).
    identities     text[]      NOT NULL,
    rows_deleted   bigint      NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL,
    created_by     text        NOT NULL,
    updated_at     timestamptz NOT NULL,
    updated_by     text        NOT NULL,
    completed_at   timestamptz
);
CREATE INDEX workorders_scope_idx ON workorders (org_id, sandbox_name, created_at);
-- The open orders: the tick's lookup and the bound on an org's orders in flight.
CREATE INDEX workorders_open_idx ON workorders (org_id) WHERE status NOT IN ('completed', 'failed');
-- The quota's sums: an org's accepted identities by day.
CREATE INDEX workorders_quota_idx ON workorders (org_id, created_at) INCLUDE (identity_count);

CREATE TABLE workorder_parts (
    workorder_id  text        NOT NULL REFERENCES workorders (id) ON DELETE CASCADE,
    dataset_id    text        NOT NULL,
    dataset_name  text        NOT NULL,
    status        text        NOT NULL CHECK (status IN ('waiting', 'completed', 'skipped')),
    lake_rows     bigint      NOT NULL DEFAULT 0,
    profile_rows  bigint      NOT NULL DEFAULT 0,
    completed_at  timestamptz,
    PRIMARY KEY (workorder_id, dataset_id)
);

GRANT ALL ON workorders, workorder_parts TO retention_app;

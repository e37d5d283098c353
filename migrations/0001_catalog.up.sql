-- Datasets, their row-expiration settings, the TTL policy overrides and the audit log.
-- All times are timestamptz; the service's sessions run in UTC.

CREATE TABLE datasets (
    id             text        PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
    org_id         text        NOT NULL,
    sandbox_name   text        NOT NULL,
    name           text        NOT NULL,
    description    text,
    tags           jsonb       NOT NULL DEFAULT '{}',
    data_behavior  text        NOT NULL CHECK (data_behavior IN ('time-series', 'record')),
    managed_by     text        NOT NULL CHECK (managed_by IN ('CUSTOMER', 'SYSTEM')),
    schema_ref     jsonb,
    extensions     jsonb       NOT NULL DEFAULT '{}',
    version        integer     NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    created_user   text        NOT NULL,
    updated_user   text        NOT NULL,
    created_client text        NOT NULL,
    -- Set when the dataset is deleted: it disappears from the API at once, and its rows are removed in the
    -- background, since a dataset may hold millions of them.
    deleted_at     timestamptz
);
COMMENT ON COLUMN datasets.version IS 'bumped on every change; shown as the semver 1.0.<version> and used as the ETag';
COMMENT ON COLUMN datasets.extensions IS 'extension keys the service does not own, as sent; rowExpiration lives in row_expirations';

-- Names are unique among the live datasets of a sandbox; a deleted dataset frees its name.
CREATE UNIQUE INDEX datasets_name_key ON datasets (org_id, sandbox_name, name) WHERE deleted_at IS NULL;
CREATE INDEX datasets_scope_created_idx ON datasets (org_id, sandbox_name, created_at, id) WHERE deleted_at IS NULL;
CREATE INDEX datasets_deleted_idx ON datasets (deleted_at) WHERE deleted_at IS NOT NULL;

CREATE TABLE row_expirations (
    dataset_id        text        NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    store             text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    ttl_value         text,
    value_status      text        NOT NULL CHECK (value_status IN ('default', 'custom')),
    set_by            text        NOT NULL CHECK (set_by IN ('user', 'service')),
    updated_at        timestamptz NOT NULL,
    last_completed_at timestamptz,
    PRIMARY KEY (dataset_id, store)
);
COMMENT ON COLUMN row_expirations.ttl_value IS 'ISO-8601 period as sent (strict grammar); NULL disables expiry for the store';

CREATE TABLE ttl_policies (
    org_id        text        NOT NULL,
    store         text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    managed_by    text        NOT NULL CHECK (managed_by IN ('CUSTOMER', 'SYSTEM')),
    min_value     text        NOT NULL,
    max_value     text,
    default_value text        NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (org_id, store, managed_by)
);
COMMENT ON TABLE ttl_policies IS 'per-org overrides of the built-in TTL limits; an org without a row uses the built-in ones';

CREATE TABLE audit_events (
    id           uuid        PRIMARY KEY,
    org_id       text        NOT NULL,
    sandbox_name text        NOT NULL,
    occurred_at  timestamptz NOT NULL,
    request_id   text        NOT NULL,
    asset_type   text        NOT NULL,
    asset_id     text        NOT NULL,
    asset_name   text        NOT NULL,
    action       text        NOT NULL,
    status       text        NOT NULL,
    user_id      text        NOT NULL,
    client_id    text        NOT NULL,
    details      jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_events_scope_time_idx ON audit_events (org_id, sandbox_name, occurred_at DESC, id);
CREATE INDEX audit_events_asset_idx ON audit_events (org_id, asset_id, occurred_at DESC);

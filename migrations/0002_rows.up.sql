-- The row store. Rows are placed by when they expire, so that a retention run removes most expired rows by
-- dropping whole partitions (docs/storage.md has the design and the measurements that chose it).

-- Every TTL setting a store of a dataset has had, with when it was in force. Reads and runs decide expiry from this
-- history, so a TTL change takes effect at once without rewriting rows, and rows that expired under an earlier
-- setting stay expired (no resurrection).
CREATE TABLE ttl_settings (
    id              bigserial   PRIMARY KEY,
    dataset_id      text        NOT NULL REFERENCES datasets (id) ON DELETE CASCADE,
    store           text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    ttl             interval,   -- NULL: expiry disabled while this setting was in force
    effective_from  timestamptz NOT NULL,
    effective_until timestamptz, -- NULL: the current setting
    CHECK (effective_until IS NULL OR effective_until >= effective_from)
);
CREATE UNIQUE INDEX ttl_settings_current_key ON ttl_settings (dataset_id, store) WHERE effective_until IS NULL;
CREATE INDEX ttl_settings_dataset_idx ON ttl_settings (dataset_id, store, effective_from);

-- The settings datasets already had when this migration ran.
INSERT INTO ttl_settings (dataset_id, store, ttl, effective_from)
SELECT dataset_id, store, ttl_value::interval, updated_at FROM row_expirations;

-- One table per store, both partitioned by placement: the expiry a row had under the setting in force when it was
-- stored ('infinity' when that setting kept rows forever).
CREATE TABLE lake_rows (
    dataset_id     text        NOT NULL,
    row_id         text        NOT NULL,
    ts             timestamptz NOT NULL,
    ingested_at    timestamptz NOT NULL,
    placed_expiry  timestamptz NOT NULL,
    setting_id     bigint      NOT NULL,
    own_expiry     timestamptz, -- the row's own _expiresAt (or timestamp + _ttl)
    never_expires  boolean     NOT NULL DEFAULT false, -- _ttl: -1
    payload        jsonb       NOT NULL
) PARTITION BY RANGE (placed_expiry);
CREATE INDEX lake_rows_read_idx ON lake_rows (dataset_id, ts, row_id);
CREATE INDEX lake_rows_id_idx ON lake_rows (dataset_id, row_id);

CREATE TABLE profile_rows (LIKE lake_rows INCLUDING DEFAULTS) PARTITION BY RANGE (placed_expiry);
CREATE INDEX profile_rows_read_idx ON profile_rows (dataset_id, ts, row_id);
CREATE INDEX profile_rows_id_idx ON profile_rows (dataset_id, row_id);

-- The partitions of both stores: one per calendar month of placed_expiry, plus one for 'infinity'.
CREATE TABLE row_partitions (
    name        text        PRIMARY KEY,
    store       text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    lower_bound timestamptz NOT NULL,
    upper_bound timestamptz NOT NULL,
    UNIQUE (store, lower_bound)
);

-- Counters kept as rows arrive and leave, in the same transactions: exact per-dataset counts of a partition without
-- scanning it, so a drop can record what it removed, and dataset metrics need no COUNT(*).
CREATE TABLE row_stats (
    partition_name  text        NOT NULL REFERENCES row_partitions (name) ON DELETE CASCADE,
    dataset_id      text        NOT NULL,
    setting_id      bigint      NOT NULL,
    row_count       bigint      NOT NULL,
    max_ingested_at timestamptz NOT NULL,
    PRIMARY KEY (partition_name, dataset_id, setting_id)
);
CREATE INDEX row_stats_dataset_idx ON row_stats (dataset_id);

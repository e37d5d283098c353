-- Retention runs: each scheduled slot or manual request, the per-dataset parts of it, and a ledger of every
-- removal written in the transaction that removes the rows, from which the Expire audit events are built.

CREATE TABLE retention_runs (
    id                 uuid        PRIMARY KEY,
    store              text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    trigger            text        NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    scheduled_for      timestamptz, -- the cron slot of a scheduled run
    org_id             text,        -- a manual run's scope; NULL for a scheduled run (every org)
    sandbox_name       text,
    dataset_ids        text[],      -- a manual run limited to some datasets
    dry_run            boolean     NOT NULL DEFAULT false,
    status             text        NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'partial')),
    evaluated_at       timestamptz NOT NULL, -- the one time at which the run judges expiry
    grace              interval    NOT NULL, -- the ingestion grace in force when the run was created
    created_at         timestamptz NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    datasets_total     integer     NOT NULL DEFAULT 0,
    datasets_done      integer     NOT NULL DEFAULT 0,
    error              text,
    CHECK ((trigger = 'schedule') = (scheduled_for IS NOT NULL))
);
-- One run per slot and store, whatever replica or restart tries to create it.
CREATE UNIQUE INDEX retention_runs_slot_key ON retention_runs (store, scheduled_for) WHERE scheduled_for IS NOT NULL;
CREATE INDEX retention_runs_created_idx ON retention_runs (created_at DESC, id);

CREATE TABLE retention_run_datasets (
    run_id             uuid        NOT NULL REFERENCES retention_runs (id) ON DELETE CASCADE,
    dataset_id         text        NOT NULL,
    org_id             text        NOT NULL,
    sandbox_name       text        NOT NULL,
    status             text        NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
    ttl_value          text,       -- the store's TTL when the run evaluated the dataset
    rows_counted       bigint,     -- a dry run's count of the rows it would delete
    error              text,
    started_at         timestamptz,
    finished_at        timestamptz,
    PRIMARY KEY (run_id, dataset_id)
);
CREATE INDEX retention_run_datasets_scope_idx ON retention_run_datasets (org_id, sandbox_name, run_id);

CREATE TABLE retention_deletions (
    id             bigserial   PRIMARY KEY,
    run_id         uuid        NOT NULL REFERENCES retention_runs (id) ON DELETE CASCADE,
    dataset_id     text        NOT NULL,
    partition_name text        NOT NULL,
    rows_deleted   bigint      NOT NULL,
    dropped        boolean     NOT NULL, -- the rows left with their whole partition
    deleted_at     timestamptz NOT NULL
);
CREATE INDEX retention_deletions_run_idx ON retention_deletions (run_id, dataset_id);

-- The last cron slot each store's schedule has run, so a slot missed while no replica ran is caught up once.
CREATE TABLE retention_schedule (
    store     text        PRIMARY KEY,
    last_slot timestamptz NOT NULL
);


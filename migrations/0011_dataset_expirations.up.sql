-- Dataset expirations (Adobe's Data Hygiene /ttl): a whole dataset's deletion scheduled for a date. The scheduler
-- deletes the dataset when the expiry comes due, as DELETE /dataSets/{id} does; rows leave with the next run.

CREATE TABLE dataset_expirations (
    id           text        PRIMARY KEY CHECK (id ~ '^SD-[0-9a-f-]{36}$'),
    org_id       text        NOT NULL,
    sandbox_name text        NOT NULL,
    -- No foreign key's cascade: a deleted dataset keeps its row (soft delete), and its expiration's history too.
    dataset_id   text        NOT NULL REFERENCES datasets (id),
    display_name text        NOT NULL,
    description  text,
    status       text        NOT NULL CHECK (status IN ('pending', 'executing', 'cancelled', 'completed')),
    expiry       timestamptz NOT NULL,
    -- Why a due expiration still waits (a legal hold), or why it ended cancelled (the dataset was deleted first).
    reason       text,
    created_at   timestamptz NOT NULL,
    created_by   text        NOT NULL,
    updated_at   timestamptz NOT NULL,
    updated_by   text        NOT NULL,
    executing_at timestamptz,
    completed_at timestamptz,
    cancelled_at timestamptz,
    -- Each change as Adobe's ?include=history shows it: [{status, expiry, updatedAt, updatedBy}], oldest first.
    history      jsonb       NOT NULL DEFAULT '[]'
);
COMMENT ON TABLE dataset_expirations IS 'scheduled deletions of whole datasets (Data Hygiene /ttl); never deleted, only cancelled or completed';

-- One open expiration per dataset: a second create, or a reopen beside another, fails on this index as a last net
-- under the service's own check.
CREATE UNIQUE INDEX dataset_expirations_open_key ON dataset_expirations (dataset_id)
    WHERE status IN ('pending', 'executing');
CREATE INDEX dataset_expirations_scope_idx ON dataset_expirations (org_id, sandbox_name, updated_at, id);
-- The scheduler's look for due work reads only the open ones.
CREATE INDEX dataset_expirations_due_idx ON dataset_expirations (expiry) WHERE status IN ('pending', 'executing');
-- The quota counts an org's pending expirations across its sandboxes.
CREATE INDEX dataset_expirations_org_pending_idx ON dataset_expirations (org_id) WHERE status = 'pending';

GRANT ALL ON dataset_expirations TO retention_app;

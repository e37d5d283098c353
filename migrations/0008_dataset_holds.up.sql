-- Legal holds: while a dataset has an active hold, no run, row delete or dataset delete removes any of its rows,
-- whatever its TTL says. A release sets released_at and keeps the row, so that the holds a dataset had stay on
-- record beside their Hold and Release audit events.
CREATE TABLE dataset_holds (
    id              text        PRIMARY KEY CHECK (id ~ '^[0-9a-f]{24}$'),
    dataset_id      text        NOT NULL REFERENCES datasets (id),
    reason          text        NOT NULL CHECK (reason <> ''),
    reference       text,
    placed_by       text        NOT NULL,
    placed_client   text        NOT NULL,
    placed_at       timestamptz NOT NULL,
    released_by     text,
    released_at     timestamptz,
    CHECK ((released_by IS NULL) = (released_at IS NULL))
);
-- Runs ask "which datasets are held" in every removal transaction; the active holds are few.
CREATE INDEX dataset_holds_active_idx ON dataset_holds (dataset_id) WHERE released_at IS NULL;

-- A held dataset's part of a run ends as held: nothing of it was removed while it was held.
ALTER TABLE retention_run_datasets DROP CONSTRAINT retention_run_datasets_status_check,
    ADD CONSTRAINT retention_run_datasets_status_check
        CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'held'));

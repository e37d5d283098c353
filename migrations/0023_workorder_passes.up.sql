-- Work-order passes (issue #31, its speed): an order of many identities removes its rows partition by partition,
-- in block ranges of each partition (workorder_passes), each pass one transaction over every dataset of the order,
-- rather than one statement per dataset reading the dataset's rows through its index and hashing every key anew.
-- The passes are planned when the order is submitted, as a run plans its walk; the last range of a partition is
-- open-ended (to_block NULL): it reaches the table's end when the pass runs, so rows appended after the plan are
-- removed too. A partition that gains the order's rows after the plan is planned when the order settles.
-- Each pass writes, in its transaction, what it removed from each dataset (workorder_removals): the order's ledger,
-- from which each dataset's part completes with its Delete event, as a run's Expire events come from
-- retention_deletions. The ledger keeps keyed hashes of the identities matched (catalog.IdentityHash), never the
-- identities.
-- Whether the order goes by passes: decided when it is submitted (planPasses), when its datasets hold enough of the
-- rows of the partitions that hold theirs; otherwise it removes dataset by dataset, through each dataset's index.
ALTER TABLE workorders ADD COLUMN by_passes boolean NOT NULL DEFAULT false;

CREATE TABLE workorder_passes (
    workorder_id   text        NOT NULL REFERENCES workorders (id) ON DELETE CASCADE,
    store          text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    partition_name text        NOT NULL,
    from_block     bigint      NOT NULL CHECK (from_block >= 0),
    to_block       bigint      CHECK (to_block > from_block), -- NULL: to the table's end when the pass runs
    held           text[]      NOT NULL DEFAULT '{}', -- the order's datasets a hold kept out of the pass
    rows           bigint      NOT NULL DEFAULT 0,
    done_at        timestamptz,
    PRIMARY KEY (workorder_id, store, partition_name, from_block)
);

CREATE TABLE workorder_removals (
    workorder_id    text        NOT NULL REFERENCES workorders (id) ON DELETE CASCADE,
    store           text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    partition_name  text        NOT NULL,
    from_block      bigint      NOT NULL,
    dataset_id      text        NOT NULL,
    rows_deleted    bigint      NOT NULL CHECK (rows_deleted > 0),
    row_ids         text[]      NOT NULL, -- up to 1,000 of the _ids removed, the smallest
    identity_hashes text[]      NOT NULL, -- the keyed hashes of every identity of the order the rows carried
    removed_at      timestamptz NOT NULL,
    PRIMARY KEY (workorder_id, dataset_id, store, partition_name, from_block)
);

GRANT ALL ON workorder_passes, workorder_removals TO retention_app;

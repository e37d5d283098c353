-- Pending listings (issue #32.3, its cost): a run's partition drop no longer lists, in its transaction, the rows of
-- the partition's datasets that keep a deletion manifest: listing read and wrote every removed row while the drop held
-- the store's parent table. The drop records here instead, in its transaction, which rows are to be listed: those of
-- the datasets listed in the detached table name, which is no longer part of the store (no read sees it, nothing
-- writes it) and stays until the release drops it. So the _ids a removal took are fixed in the transaction that
-- removes them. The release lists them into deletion_manifests from that table, deletes the row here and drops the
-- table, in one transaction; a reader of a run's manifest first lists the pending listings of that run the same way.
-- The foreign key keeps the table from leaving detached_partitions, so from being dropped, while its listing waits.
CREATE TABLE pending_listings (
    name         text        PRIMARY KEY REFERENCES detached_partitions (name),
    removal_kind text        NOT NULL CHECK (removal_kind = 'run'),
    removal_id   text        NOT NULL,
    store        text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    listed       text[]      NOT NULL, -- the datasets whose rows in the table are listed
    deleted      text[]      NOT NULL, -- those of them that were deleted: listed with reason dataset-deleted
    removed_at   timestamptz NOT NULL  -- when the drop removed the rows: the entries' removed_at
);
-- A reader lists the pending listings of its run.
CREATE INDEX pending_listings_removal_idx ON pending_listings (removal_kind, removal_id);
GRANT ALL ON pending_listings TO retention_app;

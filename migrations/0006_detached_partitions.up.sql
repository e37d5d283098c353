-- Partitions a run has detached from their store and not yet dropped, under the names they were renamed to. A run
-- detaches a wholly expired partition, records its rows in the ledger and commits, which holds the store's parent
-- table only for the catalog change; it then drops the detached table in a transaction of its own, so reads and
-- ingestion of the store do not wait while the file system releases the files (about 30 ms a partition of 150,000
-- rows). A table left here by a crash or a lock timeout is dropped with the next batch of drops.
CREATE TABLE detached_partitions (
    name        text        PRIMARY KEY,
    detached_at timestamptz NOT NULL
);
GRANT ALL ON detached_partitions TO retention_app;

-- Bloom filters of the _ids each dataset stored in each partition, so that a chunk re-sending _ids probes only the
-- partitions that may hold one (docs/storage.md, "Replacing re-sent _ids"). A (partition, dataset) pair holding
-- rows and no filter is unfiltered: every _id is probed there, as before this migration. Rows stored before it
-- are such pairs, until their partition empties.
CREATE TABLE row_id_filters (
    -- Dropping a partition (its row_partitions row) takes its filters with it, in the drop's transaction.
    partition_name text    NOT NULL REFERENCES row_partitions (name) ON DELETE CASCADE,
    dataset_id     text    NOT NULL,
    seq            integer NOT NULL CHECK (seq >= 0), -- a pair's filters, filled in order; the last one takes new ids
    ids            integer NOT NULL CHECK (ids >= 0), -- _ids added to this filter
    filter         bytea   NOT NULL,                  -- bloom.BloomFilter.MarshalBinary
    PRIMARY KEY (dataset_id, partition_name, seq)
);
CREATE INDEX row_id_filters_partition_idx ON row_id_filters (partition_name);

-- Deletion manifests in chunks (issue #32.3, its cost): a row of deletion_manifests held one removed row, so a removal
-- wrote a heap tuple and an index entry for each row it removed. A row now holds a chunk: up to 1,000 entries of one
-- removal, dataset, store and reason, written by the removing statement, as parallel arrays whose i-th elements
-- are one entry. An entry's place in its manifest is (id, its ordinal in the chunk), which the API reads by keyset.
-- The entries already written are regrouped in their order, each group of a removal, dataset, store, reason and
-- time (one removing statement) cut into chunks of 1,000; the chunks take ids after every existing one, in that order.

ALTER TABLE deletion_manifests
    ADD COLUMN entries    integer,
    ADD COLUMN row_ids    text[],
    ADD COLUMN timestamps timestamptz[],
    ADD COLUMN expiries   timestamptz[],
    ALTER COLUMN row_id DROP NOT NULL,
    ALTER COLUMN ts DROP NOT NULL;

INSERT INTO deletion_manifests (id, removal_kind, removal_id, dataset_id, store, reason, removed_at, entries, row_ids,
                                timestamps, expiries)
SELECT (SELECT coalesce(max(id), 0) FROM deletion_manifests) + row_number() OVER (ORDER BY min(e.id)),
       e.removal_kind, e.removal_id, e.dataset_id, e.store, e.reason, e.removed_at, count(*),
       array_agg(e.row_id ORDER BY e.id), array_agg(e.ts ORDER BY e.id),
       CASE WHEN e.reason = 'expired' THEN array_agg(e.expires_at ORDER BY e.id) END
FROM (SELECT m.*, (row_number() OVER (PARTITION BY m.removal_kind, m.removal_id, m.dataset_id, m.store, m.reason,
                                                   m.removed_at ORDER BY m.id) - 1) / 1000 AS chunk
      FROM deletion_manifests m) e
GROUP BY e.removal_kind, e.removal_id, e.dataset_id, e.store, e.reason, e.removed_at, e.chunk;

DELETE FROM deletion_manifests WHERE entries IS NULL;
SELECT setval(pg_get_serial_sequence('deletion_manifests', 'id'), coalesce(max(id), 0) + 1, false) FROM deletion_manifests;

ALTER TABLE deletion_manifests
    DROP COLUMN row_id,
    DROP COLUMN ts,
    DROP COLUMN expires_at,
    ALTER COLUMN entries SET NOT NULL,
    ALTER COLUMN row_ids SET NOT NULL,
    ALTER COLUMN timestamps SET NOT NULL,
    -- 65,535: an entry's place is read as id * 65,536 + its ordinal (postgres/manifest_read.go).
    ADD CONSTRAINT deletion_manifests_chunk_check CHECK (entries BETWEEN 1 AND 65535
        AND cardinality(row_ids) = entries AND cardinality(timestamps) = entries
        AND (expiries IS NULL OR cardinality(expiries) = entries));

-- Stored out of line without compression: compressing the arrays (pglz) took about as long as writing them.
ALTER TABLE deletion_manifests
    ALTER COLUMN row_ids SET STORAGE EXTERNAL,
    ALTER COLUMN timestamps SET STORAGE EXTERNAL,
    ALTER COLUMN expiries SET STORAGE EXTERNAL;

COMMENT ON COLUMN deletion_manifests.entries IS 'how many entries the chunk holds: the length of each of its arrays';
COMMENT ON COLUMN deletion_manifests.row_ids IS 'the _ids of the rows the chunk lists';
COMMENT ON COLUMN deletion_manifests.timestamps IS 'each row''s clock: its event time, or a record''s last write';
COMMENT ON COLUMN deletion_manifests.expiries IS
    'each row''s expiry, for a chunk of rows that went because they expired (reason expired); NULL otherwise';

-- Back to a row of deletion_manifests an entry, in the order of the chunks and their ordinals, with ids after every
-- chunk's.
ALTER TABLE deletion_manifests
    DROP CONSTRAINT deletion_manifests_chunk_check,
    ADD COLUMN row_id     text,
    ADD COLUMN ts         timestamptz,
    ADD COLUMN expires_at timestamptz,
    ALTER COLUMN entries DROP NOT NULL,
    ALTER COLUMN row_ids DROP NOT NULL,
    ALTER COLUMN timestamps DROP NOT NULL;

INSERT INTO deletion_manifests (id, removal_kind, removal_id, dataset_id, store, row_id, ts, expires_at, reason, removed_at)
SELECT (SELECT coalesce(max(id), 0) FROM deletion_manifests) + row_number() OVER (ORDER BY m.id, u.ord),
       m.removal_kind, m.removal_id, m.dataset_id, m.store, u.row_id, u.ts, u.expires_at, m.reason, m.removed_at
FROM deletion_manifests m, unnest(m.row_ids, m.timestamps, m.expiries) WITH ORDINALITY AS u (row_id, ts, expires_at, ord);

DELETE FROM deletion_manifests WHERE row_id IS NULL;
SELECT setval(pg_get_serial_sequence('deletion_manifests', 'id'), coalesce(max(id), 0) + 1, false) FROM deletion_manifests;

ALTER TABLE deletion_manifests
    DROP COLUMN entries,
    DROP COLUMN row_ids,
    DROP COLUMN timestamps,
    DROP COLUMN expiries,
    ALTER COLUMN row_id SET NOT NULL,
    ALTER COLUMN ts SET NOT NULL;

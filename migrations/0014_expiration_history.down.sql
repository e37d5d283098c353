ALTER TABLE dataset_expirations ADD COLUMN history jsonb NOT NULL DEFAULT '[]';
UPDATE dataset_expirations e
SET history = (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object('status', h.status, 'expiry', h.expiry,
                   'updatedAt', h.updated_at, 'updatedBy', h.updated_by, 'reason', h.reason)) ORDER BY h.seq)
               FROM dataset_expiration_history h WHERE h.expiration_id = e.id)
WHERE EXISTS (SELECT 1 FROM dataset_expiration_history h WHERE h.expiration_id = e.id);
DROP INDEX dataset_expirations_dataset_idx;
DROP TABLE dataset_expiration_history;

DROP TABLE deletion_manifests;
ALTER TABLE row_expirations DROP COLUMN deletion_manifest;

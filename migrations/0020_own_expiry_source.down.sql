ALTER TABLE profile_rows DROP COLUMN own_expiry_source;
ALTER TABLE lake_rows DROP COLUMN own_expiry_source;

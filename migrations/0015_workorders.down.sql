DROP TABLE workorder_parts;
DROP TABLE workorders;
DROP INDEX profile_rows_identities_idx;
DROP INDEX lake_rows_identities_idx;
ALTER TABLE profile_rows DROP COLUMN identities;
ALTER TABLE lake_rows DROP COLUMN identities;

DROP INDEX lake_rows_first_identity_idx;
DROP INDEX profile_rows_first_identity_idx;
DROP INDEX lake_rows_identities_idx;
DROP INDEX profile_rows_identities_idx;
CREATE INDEX lake_rows_identities_idx ON lake_rows USING gin (identities) WHERE identities IS NOT NULL;
CREATE INDEX profile_rows_identities_idx ON profile_rows USING gin (identities) WHERE identities IS NOT NULL;

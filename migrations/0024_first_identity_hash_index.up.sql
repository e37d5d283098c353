-- A row is found by its identities through two indexes instead of one GIN index over them all: a hash index on its
-- first identity, which is every identity of most rows (those of one identity, or one marked primary), and the GIN
-- index of 0017 kept only for the rows of several. An order of a few keys asks both (identityMatchFew): a row's
-- first identity among the keys, or, for a row of several, any. A hash index stores no NULL, so a row without
-- identities costs it nothing, as the partial GIN index did not.
--
-- Why (issue #31, ingestion with identities): a GIN entry costs an insertion into its pending list and then its merge
-- into the entry tree, at the next VACUUM or when the list is full; a hash index inserts one 4-byte hash code.
-- Measured on PostgreSQL 15 (a table like a partition with its two row indexes, COPY of 600,000 rows of one of
-- 1,000,000 people each, then VACUUM, three times each): no identities index 5.55 s in all; the GIN index 8.15 s
-- (509 MB of WAL); these two 6.92 to 7.43 s (365 MB of WAL).
DROP INDEX lake_rows_identities_idx;
DROP INDEX profile_rows_identities_idx;
CREATE INDEX lake_rows_first_identity_idx ON lake_rows USING hash ((identities[1]));
CREATE INDEX profile_rows_first_identity_idx ON profile_rows USING hash ((identities[1]));
CREATE INDEX lake_rows_identities_idx ON lake_rows USING gin (identities) WHERE cardinality(identities) > 1;
CREATE INDEX profile_rows_identities_idx ON profile_rows USING gin (identities) WHERE cardinality(identities) > 1;

-- A legal hold keeps every version of a row it covers, as S3 Object Lock keeps a held object's versions: a row of a
-- held dataset that is written again (a re-sent _id) is not deleted but marked with when it was replaced, in place,
-- in its partition, where it keeps its placed expiry, setting and counters. Ordinary reads skip such kept versions;
-- includeExpired reads show them; runs judge them by the expiry rule like every row, so they leave once no hold
-- covers their dataset and their own expiry has passed (docs/storage.md, "Versions a hold keeps"). Adding a column
-- without a default rewrites no row.
ALTER TABLE lake_rows ADD COLUMN replaced_at timestamptz;
ALTER TABLE profile_rows ADD COLUMN replaced_at timestamptz;
COMMENT ON COLUMN lake_rows.replaced_at IS 'NULL: the current version of its _id; else when a write under a legal hold replaced it';
COMMENT ON COLUMN profile_rows.replaced_at IS 'NULL: the current version of its _id; else when a write under a legal hold replaced it';

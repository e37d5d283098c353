-- Which field of its event set a row's own expiry (own_expiry): 't' for _ttl (the row's clock plus a period), 'e' for
-- _expiresAt (an instant); NULL when the row has none (_ttl: -1 is never_expires). The instant alone cannot tell
-- them apart (an _expiresAt can equal a clock plus a _ttl), so GET /dataSets/{id}/rows/{_id}/expiry reads it here.
-- A "char" takes one byte, and nothing in a row that has no override; adding the column without a default rewrites
-- no row. Rows stored before this migration keep NULL beside an own expiry: which field set it is unknown, and the
-- explanation says so.
ALTER TABLE lake_rows ADD COLUMN own_expiry_source "char";
ALTER TABLE profile_rows ADD COLUMN own_expiry_source "char";
COMMENT ON COLUMN lake_rows.own_expiry_source IS '''t'': own_expiry came from _ttl, ''e'': from _expiresAt; NULL: no own expiry, or stored before migration 0020';
COMMENT ON COLUMN profile_rows.own_expiry_source IS '''t'': own_expiry came from _ttl, ''e'': from _expiresAt; NULL: no own expiry, or stored before migration 0020';

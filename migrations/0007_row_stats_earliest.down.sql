ALTER TABLE row_stats DROP COLUMN min_ingested_at, DROP COLUMN min_ts;

-- Each counter group's earliest ingestion time and earliest event time. A group placed after a run's time whose
-- setting is still in force holds no expired row unless an earlier setting with a TTL expired one of its rows,
-- which only a row ingested before that setting ended can be (an import with its own _ingestedAt), with an event
-- time at or before the setting's earlier_expired_through. Runs read these to find such groups
-- (postgres.laterGroupMayExpire). Both are lower bounds: deletes leave them as they are, which costs reading,
-- never a wrong answer.
--
-- min_ts is filled in from the rows: an index probe of (dataset_id, ts) per group. min_ingested_at has no index to
-- read it from, and computing it would scan every stored row inside this migration, holding the counters all that
-- time; NULL means "unknown, may be anything" and runs treat it so (min_ts still excludes most such groups).
-- Ingestion keeps a NULL as it is, and starts afresh once the group is empty.
ALTER TABLE row_stats ADD COLUMN min_ingested_at timestamptz, ADD COLUMN min_ts timestamptz;
DO $$
DECLARE g record;
BEGIN
    FOR g IN SELECT partition_name, dataset_id, setting_id FROM row_stats
             WHERE row_count > 0 AND to_regclass(quote_ident(partition_name)) IS NOT NULL LOOP
        EXECUTE format('UPDATE row_stats SET min_ts = (SELECT min(ts) FROM %I WHERE dataset_id = $1 AND setting_id = $2)
                        WHERE partition_name = $3 AND dataset_id = $1 AND setting_id = $2', g.partition_name)
            USING g.dataset_id, g.setting_id, g.partition_name;
    END LOOP;
END $$;

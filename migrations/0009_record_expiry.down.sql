-- Record datasets lose row expiration: their settings go, and their rows return to no setting (0). Rows a record TTL
-- has hidden but no run has deleted yet come back into reads.
UPDATE lake_rows r SET setting_id = 0
FROM ttl_settings h JOIN datasets d ON d.id = h.dataset_id
WHERE d.data_behavior = 'record' AND r.setting_id = h.id;
DELETE FROM row_stats st
USING ttl_settings h JOIN datasets d ON d.id = h.dataset_id
WHERE d.data_behavior = 'record' AND st.setting_id = h.id AND h.store = 'adobe_unifiedProfile';
DELETE FROM profile_rows r USING datasets d WHERE d.id = r.dataset_id AND d.data_behavior = 'record';
INSERT INTO row_stats (partition_name, dataset_id, setting_id, row_count, max_ingested_at, min_ingested_at, min_ts)
SELECT st.partition_name, st.dataset_id, 0, sum(st.row_count), max(st.max_ingested_at), min(st.min_ingested_at), min(st.min_ts)
FROM row_stats st JOIN ttl_settings h ON h.id = st.setting_id JOIN datasets d ON d.id = h.dataset_id
WHERE d.data_behavior = 'record'
GROUP BY 1, 2;
DELETE FROM row_stats st
USING ttl_settings h JOIN datasets d ON d.id = h.dataset_id
WHERE d.data_behavior = 'record' AND st.setting_id = h.id;
DELETE FROM ttl_settings h USING datasets d WHERE d.id = h.dataset_id AND d.data_behavior = 'record';
DELETE FROM row_expirations re USING datasets d WHERE d.id = re.dataset_id AND d.data_behavior = 'record';

DELETE FROM ttl_policies WHERE records;
ALTER TABLE ttl_policies DROP CONSTRAINT ttl_policies_default_value_check, ALTER COLUMN default_value SET NOT NULL;
ALTER TABLE ttl_policies DROP CONSTRAINT ttl_policies_pkey, ADD PRIMARY KEY (org_id, store, managed_by);
ALTER TABLE ttl_policies DROP COLUMN records;

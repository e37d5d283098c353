-- Record datasets get row expiration, their TTLs counted from each row's last write (retention.Clock), under limits
-- of their own: ttl_policies gains the data behavior to its key, and a record policy may default to null (records
-- do not expire until a TTL is set).
ALTER TABLE ttl_policies ADD COLUMN records boolean NOT NULL DEFAULT false;
ALTER TABLE ttl_policies DROP CONSTRAINT ttl_policies_pkey, ADD PRIMARY KEY (org_id, store, managed_by, records);
ALTER TABLE ttl_policies ALTER COLUMN default_value DROP NOT NULL,
    ADD CONSTRAINT ttl_policies_default_value_check CHECK (default_value IS NOT NULL OR records);
COMMENT ON COLUMN ttl_policies.records IS 'true: the limits of record datasets; false: those of time-series datasets';

-- Record datasets made before this had no setting: each store starts with none, a null TTL, as new ones do.
INSERT INTO row_expirations (dataset_id, store, ttl_value, value_status, set_by, updated_at)
SELECT d.id, s.store, NULL, 'default', 'service', d.created_at
FROM datasets d CROSS JOIN (VALUES ('adobe_lakeHouse'), ('adobe_unifiedProfile')) AS s (store)
WHERE d.data_behavior = 'record'
ON CONFLICT DO NOTHING;
INSERT INTO ttl_settings (dataset_id, store, ttl, effective_from)
SELECT re.dataset_id, re.store, NULL, re.updated_at
FROM row_expirations re JOIN datasets d ON d.id = re.dataset_id
WHERE d.data_behavior = 'record'
  AND NOT EXISTS (SELECT 1 FROM ttl_settings h WHERE h.dataset_id = re.dataset_id AND h.store = re.store);

-- Their rows were stored under no setting (setting_id 0, placed at 'infinity'): they belong to the lake's null
-- setting just made, which is what they were stored under. Their ts stays as it was: the ingestion time, or the
-- timestamp a row was sent with before records' timestamps became their writes; a TTL counts from it until the row
-- is written again.
UPDATE row_stats st SET setting_id = h.id
FROM ttl_settings h
WHERE st.setting_id = 0 AND h.dataset_id = st.dataset_id AND h.store = 'adobe_lakeHouse' AND h.effective_until IS NULL;
UPDATE lake_rows r SET setting_id = h.id
FROM ttl_settings h
WHERE r.setting_id = 0 AND h.dataset_id = r.dataset_id AND h.store = 'adobe_lakeHouse' AND h.effective_until IS NULL;

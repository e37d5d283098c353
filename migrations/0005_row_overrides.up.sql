-- The stores of datasets that have ever stored a row with its own expiry (_expiresAt, _ttl or _ttl: -1). Such a row
-- expires by its override, not by its event time, so reads and runs may bound their scans by event time only for
-- the stores listed nowhere here (docs/storage.md). A store is added, in the ingesting transaction, by the first
-- such row, and never removed: being listed costs speed, never correctness.
CREATE TABLE row_overrides (
    dataset_id text NOT NULL,
    store      text NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    PRIMARY KEY (dataset_id, store)
);
GRANT ALL ON row_overrides TO retention_app;

-- For each setting, what its store's earlier settings with a TTL could have expired: the latest end of one
-- (earlier_ttl_until) and the latest event time of a row without an override that one could have expired by its end
-- (earlier_expired_through, computed in Go, retention.LastExpiredEvent). A row stored under the current setting that
-- none of them can have expired (ingested after they ended, or with a later event time, or with its own expiry under
-- a TTL) has only ever been judged by the current setting, so whether it has expired is its placed expiry alone:
-- no walk through the history. Existing settings get no earlier_expired_through, which only costs speed.
ALTER TABLE ttl_settings ADD COLUMN earlier_ttl_until timestamptz, ADD COLUMN earlier_expired_through timestamptz;
UPDATE ttl_settings s SET earlier_ttl_until = (
    SELECT max(e.effective_until) FROM ttl_settings e
    WHERE e.dataset_id = s.dataset_id AND e.store = s.store AND e.ttl IS NOT NULL
      AND e.effective_until IS NOT NULL AND e.effective_from < s.effective_from);

-- The per-dataset switch for per-row expiry (extensions.adobe_lakeHouse.rowExpiration.rowOverrides, Fauna's
-- document_ttls): while 'refused', an ingestion refuses every line that carries _expiresAt or _ttl. Rows stored
-- before keep their own expiry, so turning it on deletes nothing early and changes no row's placement. Every
-- existing dataset keeps accepting overrides, as it did.
ALTER TABLE datasets ADD COLUMN row_overrides_switch text NOT NULL DEFAULT 'allowed'
    CHECK (row_overrides_switch IN ('allowed', 'refused'));
COMMENT ON COLUMN datasets.row_overrides_switch IS
    'rowOverrides: whether lines may carry _expiresAt or _ttl; read by each ingestion chunk under its lock on the dataset row';

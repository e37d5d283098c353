ALTER TABLE ttl_settings DROP COLUMN earlier_ttl_until, DROP COLUMN earlier_expired_through;
DROP TABLE row_overrides;

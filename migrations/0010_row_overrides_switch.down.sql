ALTER TABLE datasets DROP COLUMN row_overrides_switch;

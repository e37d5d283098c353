DROP TABLE workorder_removals;
DROP TABLE workorder_passes;
ALTER TABLE workorders DROP COLUMN by_passes;

DROP TABLE workorder_removals;
DROP TABLE workorder_passes;

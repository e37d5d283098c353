DROP TABLE retention_schedule;
DROP TABLE retention_deletions;
DROP TABLE retention_run_datasets;
DROP TABLE retention_runs;

UPDATE retention_run_datasets SET status = 'succeeded' WHERE status = 'held';
ALTER TABLE retention_run_datasets DROP CONSTRAINT retention_run_datasets_status_check,
    ADD CONSTRAINT retention_run_datasets_status_check
        CHECK (status IN ('pending', 'running', 'succeeded', 'failed'));
DROP TABLE dataset_holds;

DROP TABLE dataset_expirations;

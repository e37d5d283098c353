DROP TABLE row_stats;
DROP TABLE row_partitions;
DROP TABLE profile_rows;
DROP TABLE lake_rows;
DROP TABLE ttl_settings;

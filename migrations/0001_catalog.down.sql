DROP TABLE audit_events;
DROP TABLE ttl_policies;
DROP TABLE row_expirations;
DROP TABLE datasets;

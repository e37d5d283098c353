-- An expiration's history leaves its row for a table of its own, one row per change, appended and never rewritten:
-- a change costs the same however many came before it, and a read of expirations pays for history only when it
-- asks for it (include=history). Each expiration keeps its newest 100 entries (catalog.MaxExpirationHistory); the
-- audit log keeps every change.

CREATE TABLE dataset_expiration_history (
    expiration_id text        NOT NULL REFERENCES dataset_expirations (id),
    -- 1, 2, ... in the order of the changes; the entries past the bound leave from the low end.
    seq           bigint      NOT NULL CHECK (seq > 0),
    status        text        NOT NULL,
    expiry        timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    updated_by    text        NOT NULL,
    reason        text,
    PRIMARY KEY (expiration_id, seq)
);
COMMENT ON TABLE dataset_expiration_history IS 'each change of a dataset expiration, its newest 100 kept (include=history)';

INSERT INTO dataset_expiration_history (expiration_id, seq, status, expiry, updated_at, updated_by, reason)
SELECT e.id, h.seq, h.entry->>'status', (h.entry->>'expiry')::timestamptz, (h.entry->>'updatedAt')::timestamptz,
       h.entry->>'updatedBy', NULLIF(h.entry->>'reason', '')
FROM dataset_expirations e
CROSS JOIN LATERAL jsonb_array_elements(e.history) WITH ORDINALITY AS h (entry, seq)
WHERE h.seq > jsonb_array_length(e.history) - 100;

ALTER TABLE dataset_expirations DROP COLUMN history;

-- The reason of an expiration that is not cancelled is derived when it is read (the hold its dataset waits for, if it
-- is due); a stored one could only go stale.
UPDATE dataset_expirations SET reason = NULL WHERE status <> 'cancelled' AND reason IS NOT NULL;

-- A dataset's expirations, newest first: the lookup by dataset id and the bound on a dataset's expirations.
CREATE INDEX dataset_expirations_dataset_idx ON dataset_expirations (dataset_id, created_at);

GRANT ALL ON dataset_expiration_history TO retention_app;

-- Back to listing in the drop: the listings still pending are written out first, as the release would write them
-- (postgres/manifest.go, listPending), so that no manifest loses its entries.
DO $$
DECLARE
    p pending_listings%ROWTYPE;
BEGIN
    FOR p IN SELECT * FROM pending_listings ORDER BY name LOOP
        EXECUTE format($q$
INSERT INTO deletion_manifests (removal_kind, removal_id, dataset_id, store, removed_at, reason, entries, row_ids, timestamps, expiries)
SELECT $1, $2, e.dataset_id, $3, $4,
       CASE WHEN e.dataset_id = ANY($6) THEN 'dataset-deleted' ELSE 'expired' END,
       count(*), array_agg(e.row_id), array_agg(e.ts), CASE WHEN NOT e.dataset_id = ANY($6) THEN array_agg(e.expires_at) END
FROM (SELECT g.dataset_id COLLATE "C" AS dataset_id, g.row_id, g.ts,
             CASE WHEN g.never_expires THEN NULL ELSE coalesce(g.own_expiry, g.ts + h.ttl) END AS expires_at,
             (row_number() OVER (PARTITION BY g.dataset_id COLLATE "C") - 1) / 1000 AS chunk
      FROM %I g LEFT JOIN ttl_settings h ON h.dataset_id = g.dataset_id AND h.id = g.setting_id
      WHERE g.dataset_id = ANY($5)) e
GROUP BY e.dataset_id, e.chunk$q$, p.name)
        USING p.removal_kind, p.removal_id, p.store, p.removed_at, p.listed, p.deleted;
    END LOOP;
END $$;
DROP TABLE pending_listings;

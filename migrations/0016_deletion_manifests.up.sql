-- Deletion manifests (issue #32.3): which rows a removal took, for the datasets and stores that ask for it
-- (extensions.<store>.rowExpiration.deletionManifest). Each removal writes its entries in the transaction that
-- removes the rows, so a manifest holds exactly the rows removed, however a run is interrupted.

ALTER TABLE row_expirations ADD COLUMN deletion_manifest boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN row_expirations.deletion_manifest IS
    'deletionManifest: each removal of the store''s rows of the dataset records their _ids in deletion_manifests';

CREATE TABLE deletion_manifests (
    -- The order entries were written in; no index of its own: the one index below, which every read uses, holds it.
    id           bigserial   NOT NULL,
    -- run: a retention run (removal_id its id); row-delete: DELETE /dataSets/{id}/rows/{_id} (removal_id the id of
    -- its Delete audit event); work-order: a record-delete work order (removal_id its id).
    removal_kind text        NOT NULL CHECK (removal_kind IN ('run', 'row-delete', 'work-order')),
    removal_id   text        NOT NULL,
    dataset_id   text        NOT NULL,
    store        text        NOT NULL CHECK (store IN ('adobe_lakeHouse', 'adobe_unifiedProfile')),
    row_id       text        NOT NULL,
    ts           timestamptz NOT NULL, -- the row's clock: its event time, or a record's last write
    expires_at   timestamptz,          -- set when the row went because it expired
    reason       text        NOT NULL CHECK (reason IN ('expired', 'dataset-deleted', 'row-delete', 'work-order')),
    removed_at   timestamptz NOT NULL
);
-- A manifest is read by its removal, dataset and store, in the order it was written (keyset on id).
CREATE INDEX deletion_manifests_removal_idx ON deletion_manifests (removal_kind, removal_id, dataset_id, id);

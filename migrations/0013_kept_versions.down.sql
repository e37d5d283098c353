-- Without the column a kept version would read as a second current row of its _id: refuse while any is stored.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM lake_rows WHERE replaced_at IS NOT NULL)
       OR EXISTS (SELECT 1 FROM profile_rows WHERE replaced_at IS NOT NULL) THEN
        RAISE EXCEPTION 'rows hold versions a legal hold kept (replaced_at is set); they leave with their expiry after the release';
    END IF;
END $$;
ALTER TABLE lake_rows DROP COLUMN replaced_at;
ALTER TABLE profile_rows DROP COLUMN replaced_at;

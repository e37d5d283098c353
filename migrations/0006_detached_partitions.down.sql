DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT name FROM detached_partitions LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I', t);
    END LOOP;
END $$;
DROP TABLE detached_partitions;

-- 012: the wide columns of the data tables compress with lz4 instead of pglz (where the server
-- has lz4: Debian's and most builds do), when a row passes the TOAST threshold (~2 KB: a
-- transaction with a long input, a log with long data, a trace's output, a contract's code).
-- pglz_compress was 13% of the PostgreSQL backend's time in a profile of a worker indexing
-- mainnet-shaped blocks; lz4 compresses several times faster to a similar size (bench/RESULTS.md:
-- raw COPY 1.14x). Metadata only: existing values stay as they were stored, new ones use lz4, and
-- both read back the same. On a partitioned table the change reaches every partition, and new
-- partitions copy it (store/partitions.cc: LIKE ... INCLUDING COMPRESSION).
DO $$
DECLARE
  col RECORD;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'
                 AND 'lz4' = ANY (enumvals)) THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: the data tables keep pglz';
    RETURN;
  END IF;
  FOR col IN SELECT * FROM (VALUES
      ('blocks', 'extra_data'), ('blocks', 'logs_bloom'),
      ('transactions', 'input'), ('transactions', 'logs_bloom'),
      ('transactions', 'access_list'), ('transactions', 'authorization_list'),
      ('transactions', 'blob_versioned_hashes'),
      ('logs', 'data'),
      ('traces', 'input'), ('traces', 'output'), ('traces', 'error'),
      ('contracts', 'bytecode'), ('contracts', 'function_sighashes')) AS c(tab, name)
  LOOP
    EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4', col.tab, col.name);
  END LOOP;
END $$;

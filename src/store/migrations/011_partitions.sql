-- 011: the data tables partitioned by block range (docs/schema.md "Partitions").
--
-- Every table keyed by block becomes a partitioned table (RANGE on its block column) with the
-- same columns, primary key and indexes; partitions of `partition_blocks` blocks (indexer_state,
-- 1,000,000 unless set before the first write: store/partitions.h) are created ahead of the
-- writes, named <table>_p<first block>. A database that already holds rows keeps them where they
-- are: the old table becomes the partition <table>_legacy for every block below
-- `partition_floor` (the first multiple of partition_blocks above the highest stored block), so
-- the migration moves no row. In a fresh database partition_floor is 0 and no legacy partition
-- exists.
DO $$
DECLARE
  spec RECORD;
  floor_block BIGINT;
  idx RECORD;
BEGIN
  INSERT INTO indexer_state (key, value) VALUES ('partition_blocks', '1000000')
    ON CONFLICT (key) DO NOTHING;
  SELECT COALESCE((max(number) / (SELECT value::bigint FROM indexer_state
                                     WHERE key = 'partition_blocks') + 1)
                  * (SELECT value::bigint FROM indexer_state WHERE key = 'partition_blocks'), 0)
    INTO floor_block FROM blocks;
  INSERT INTO indexer_state (key, value) VALUES ('partition_floor', floor_block::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;

  FOR spec IN SELECT * FROM (VALUES
      ('blocks', 'number', 'number'),
      ('withdrawals', 'block_number', 'block_number, withdrawal_index'),
      ('transactions', 'block_number', 'block_number, transaction_index'),
      ('logs', 'block_number', 'block_number, log_index'),
      ('token_transfers', 'block_number', 'block_number, log_index, batch_index'),
      ('traces', 'block_number', 'block_number, trace_index'),
      ('contracts', 'block_number', 'block_number, contract_index')) AS s(tab, col, pk)
  LOOP
    -- The old table and its index names step aside for the partitioned table.
    EXECUTE format('ALTER TABLE %I RENAME TO %I', spec.tab, spec.tab || '_legacy');
    EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', spec.tab || '_legacy',
                   spec.tab || '_pkey', spec.tab || '_legacy_pkey');
    FOR idx IN SELECT indexname FROM pg_indexes
               WHERE schemaname = current_schema() AND tablename = spec.tab || '_legacy'
                 AND indexname <> spec.tab || '_legacy_pkey'
    LOOP
      EXECUTE format('ALTER INDEX %I RENAME TO %I', idx.indexname, idx.indexname || '_legacy');
    END LOOP;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
                   ' PARTITION BY RANGE (%I)', spec.tab, spec.tab || '_legacy', spec.col);
    EXECUTE format('ALTER TABLE %I ADD PRIMARY KEY (%s)', spec.tab, spec.pk);
  END LOOP;

  -- The secondary indexes, on the partitioned tables (each partition gets its own).
  CREATE INDEX transactions_hash_idx ON transactions (hash);
  CREATE INDEX logs_address_idx ON logs (address, block_number);
  CREATE INDEX token_transfers_token_idx ON token_transfers (token_address, block_number);
  CREATE INDEX traces_transaction_idx ON traces (transaction_hash);
  CREATE INDEX traces_to_idx ON traces (to_address, block_number);
  CREATE INDEX traces_from_idx ON traces (from_address, block_number);
  CREATE INDEX contracts_address_idx ON contracts (address);

  FOR spec IN SELECT * FROM (VALUES
      ('blocks', 'number'), ('withdrawals', 'block_number'), ('transactions', 'block_number'),
      ('logs', 'block_number'), ('token_transfers', 'block_number'),
      ('traces', 'block_number'), ('contracts', 'block_number')) AS s(tab, col)
  LOOP
    IF floor_block = 0 THEN
      EXECUTE format('DROP TABLE %I', spec.tab || '_legacy');
    ELSE
      -- The old indexes match the new ones, so ATTACH adopts them instead of building others.
      EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%s)',
                     spec.tab, spec.tab || '_legacy', floor_block);
    END IF;
  END LOOP;
END $$;

-- 013: the data tables' secondary indexes become each partition's own (docs/schema.md "Indexes
-- during a backfill", store/partition_indexes.h).
--
-- Up to 012 the secondary indexes (transactions by hash, logs by address, ...) were defined on the
-- partitioned tables, so PostgreSQL built them on every partition as it was attached, and kept
-- them up to date row by row while a backfill filled it: past a few million rows that maintenance
-- costs a backfill most of its write rate (bench/RESULTS.md, growth). From 013 on only the primary
-- key (the uniqueness the idempotent range write depends on) is defined on the partitioned tables;
-- a partition's secondary indexes are built by the leader when the partition is due (finished, or
-- near the head), one partition at a time, CREATE INDEX CONCURRENTLY.
--
-- The partitions that exist keep the indexes they have: a partition index attached to a
-- partitioned index would be dropped with it, so each partition is detached first (its indexes
-- become its own), the partitioned indexes dropped, and the partition attached again (PostgreSQL
-- scans it once to check its bounds; no index is rebuilt).
DO $$
DECLARE
  part RECORD;
BEGIN
  CREATE TEMPORARY TABLE gapless_013_parts ON COMMIT DROP AS
    SELECT p.relname::text AS parent, c.relname::text AS child,
           pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    WHERE p.relname IN ('blocks', 'withdrawals', 'transactions', 'logs', 'token_transfers',
                        'traces', 'contracts')
      AND p.relnamespace = current_schema()::regnamespace;
  FOR part IN SELECT * FROM gapless_013_parts LOOP
    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', part.parent, part.child);
  END LOOP;

  DROP INDEX IF EXISTS transactions_hash_idx, logs_address_idx, token_transfers_token_idx,
    traces_transaction_idx, traces_to_idx, traces_from_idx, contracts_address_idx;

  FOR part IN SELECT * FROM gapless_013_parts LOOP
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I %s', part.parent, part.child, part.bound);
  END LOOP;
END $$;

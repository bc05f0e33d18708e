-- 014_datasets: which datasets each committed range holds, and which runs asked for which
-- (issue 35, store/datasets.h).
--
-- A range indexed without --traces and indexed again with it used to count as committed: the
-- second run skipped it, so traces existed only for the blocks the first run had not reached, and
-- nothing said so. Now every indexed_ranges row lists the datasets its last write held: 'blocks'
-- (blocks, withdrawals, transactions with their receipts, logs, token transfers, the contracts of
-- deployment transactions), 'traces' (--traces: the traces table and the contracts made by
-- factories), 'token_metadata' (--token-metadata: the tokens table), and, with the contracts
-- mode, 'decoded:<config id>' for the decoded tables of one config. Sorted, no duplicates: two
-- rows hold the same datasets when their arrays are equal (compaction of adjacent rows merges only
-- those). A block holds a dataset when some row covering it lists it; a run asking for one that a
-- committed range lacks writes that range again with it (store/writer.h "Datasets").
--
-- Rows written before this migration: 'blocks' and 'token_metadata' (the default, which cannot be
-- told from the rows: a token's NULL metadata may be a method it lacks), and 'traces' where the
-- range has a trace row (a range of empty blocks indexed with --traces has none: it is written
-- again by the next --traces run over it, which is safe, only work).
ALTER TABLE indexed_ranges ADD COLUMN datasets TEXT[] NOT NULL DEFAULT '{blocks}';
UPDATE indexed_ranges r SET datasets = CASE
    WHEN EXISTS (SELECT 1 FROM traces t WHERE t.block_number BETWEEN r.from_block AND r.to_block)
    THEN '{blocks,token_metadata,traces}'::text[]
    ELSE '{blocks,token_metadata}'::text[] END;

-- What runs asked for beyond the blocks: one row per dataset and first block (a later run from
-- the same block widens it), to_block 9223372036854775807 for a run following the chain. `verify`
-- reports the committed blocks of an asked interval that lack the dataset (a run stopped before
-- its backfill finished). A handful of rows: one per run that starts somewhere new.
CREATE TABLE dataset_requests (
  dataset    TEXT NOT NULL,
  from_block BIGINT NOT NULL,
  to_block   BIGINT NOT NULL CHECK (to_block >= from_block),
  asked_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (dataset, from_block)
);

-- 005_retractions: the retraction events of rolled-back blocks (issue 10, store/retractions.h).
--
-- When events are enabled, RollBack records, in its own transaction and before it deletes the
-- rows, one event_retractions row per orphaned block at or above events_from, with what a
-- consumer needs to undo the block's events once its rows are gone: the block's hash, its
-- transactions' hashes (the ids of block.new and transaction.confirmed are derived from them) and
-- a copy of its token transfers (the ids of token.transfer, and the amounts to reverse). The relay
-- publishes each row as one block.reverted event, per bus exactly once in seq order, before any
-- outbox row; rows every configured bus has published are pruned.
CREATE TABLE event_retractions (
  seq                BIGINT PRIMARY KEY,  -- publishing order: rollback after rollback, within one
                                          -- from the highest block down (indexer_state
                                          -- 'retraction_seq' holds the last one given)
  generation         BIGINT NOT NULL,     -- the reorg_generation of the rollback that orphaned it
  block_number       BIGINT NOT NULL,
  block_hash         BYTEA NOT NULL,
  transaction_hashes BYTEA[] NOT NULL,    -- by transaction index
  reverted_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (generation, block_number)
);

-- The orphaned block's token_transfers rows, column for column.
CREATE TABLE event_retraction_transfers (
  seq              BIGINT NOT NULL REFERENCES event_retractions (seq) ON DELETE CASCADE,
  log_index        INTEGER NOT NULL,
  batch_index      INTEGER NOT NULL,
  transaction_hash BYTEA NOT NULL,
  token_address    BYTEA NOT NULL,
  from_address     BYTEA NOT NULL,
  to_address       BYTEA NOT NULL,
  operator_address BYTEA,
  token_id         NUMERIC(78,0),
  value            NUMERIC(78,0) NOT NULL,
  token_standard   SMALLINT NOT NULL CHECK (token_standard IN (20, 721, 1155)),
  PRIMARY KEY (seq, log_index, batch_index)
);

-- Per bus: the highest event_retractions seq published (0: none), moved by the relay after the
-- broker confirmed, fenced by the row's leader_epoch like next_block.
ALTER TABLE event_cursors ADD COLUMN retracted_through BIGINT NOT NULL DEFAULT 0;

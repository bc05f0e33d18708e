-- 002_events: the transactional outbox of the event relay (issue 8).
--
-- Once events are enabled in a database (indexer_state 'events_from', recorded by the first
-- process started with --events), every range write also inserts one event_outbox row per block
-- in the same transaction: the block's events exist if and only if its data is committed. A row
-- names the block; the relay builds the block's events (block.new, transaction.confirmed,
-- token.transfer) from the committed rows when it publishes, so the outbox does not store the
-- data twice. Rows are inserted ON CONFLICT DO NOTHING: a rewritten range (either write mode)
-- neither duplicates nor loses them.
CREATE TABLE event_outbox (
  block_number BIGINT PRIMARY KEY,
  block_hash   BYTEA NOT NULL,
  event_count  INTEGER NOT NULL,   -- 1 + transactions + token transfers
  created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- How far each bus has been published: every outbox row below next_block is confirmed by that
-- bus. Advanced by the relay after the broker confirmed, fenced by the leader's epoch (a deposed
-- leader's relay cannot move it), never backwards. Outbox rows below every configured bus's
-- cursor are deleted (pruned) by the relay.
CREATE TABLE event_cursors (
  bus          TEXT PRIMARY KEY,   -- "redis://host:port", never a password
  next_block   BIGINT NOT NULL,
  leader_epoch BIGINT NOT NULL,
  events_sent  BIGINT NOT NULL DEFAULT 0,
  published_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

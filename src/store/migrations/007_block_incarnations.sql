-- 007_block_incarnations: how often each block hash was orphaned (issue 16, store/retractions.h).
--
-- A flip-flop re-org (A -> B -> A, with A's exact blocks back) publishes A's events a second
-- time. Their ids must differ from the first time: consumers deduplicate by id, and the balances
-- consumer tombstones the ids a block.reverted named, so the comeback would be skipped. Every
-- rollback that retracts a block increments its incarnation here; event ids of a block whose
-- incarnation is n > 0 carry "#n" in their identity (events/event.h). One row per block hash
-- ever orphaned (never pruned: re-orged blocks are few).
CREATE TABLE block_incarnations (
  block_hash  BYTEA PRIMARY KEY,
  incarnation INTEGER NOT NULL
);
-- The incarnation of the publication a retraction retracts (the ids it names).
ALTER TABLE event_retractions ADD COLUMN incarnation INTEGER NOT NULL DEFAULT 0;

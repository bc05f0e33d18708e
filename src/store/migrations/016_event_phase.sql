-- 016_event_phase: metadata.phase of block events, and the contracts mode's decoded events that a
-- retraction names (issue 36, docs/events.md "Phase", store/decoded_events.h).
--
-- blocks.live: true when the block was committed while a leader followed the chain tip and the
-- block was above the tip bound that leader saw when its term started (indexer_state 'live_from',
-- recorded by a leader with --follow at each term start, removed by a run without --follow). Set
-- by the range write in its own transaction, so every publication of the block's events (the
-- relay after a crash, `events replay`) carries the same phase. NULL (every block committed
-- before this migration, and every block written while no live_from was recorded) is "backfill".
-- Nullable on purpose: the writer's staging tables are made LIKE blocks without defaults.
ALTER TABLE blocks ADD COLUMN live BOOLEAN;

-- The decoded events (contracts mode) of a rolled-back block, kept with its retraction (migration
-- 005) so that its block.reverted names their ids after the decoded rows are gone: each row's
-- event type ("{schema}.{contract}.{event}") and log index (the event id's identity is the block
-- hash, with its incarnation, "/" log index).
CREATE TABLE event_retraction_decoded (
  seq        BIGINT NOT NULL REFERENCES event_retractions (seq) ON DELETE CASCADE,
  log_index  INTEGER NOT NULL,
  event_type TEXT NOT NULL,
  PRIMARY KEY (seq, log_index, event_type)
);

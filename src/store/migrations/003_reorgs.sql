-- 003_reorgs: the chain re-orgs gapless rolled back (issue 10, store/rollback.h).
--
-- A rollback deletes every row above the fork point in one transaction and records it here: when,
-- where the forks meet, how deep, the orphaned blocks' hashes and the canonical hashes at those
-- heights as the leader saw them, and the leader's epoch that did it. indexer_state keeps
-- 'reorg_generation' (+1 per rollback) and 'reorg_epoch' (the highest epoch that rolled back: a
-- deposed leader's late rollback is refused).
CREATE TABLE reorgs (
  id           BIGSERIAL PRIMARY KEY,
  detected_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  fork_point   BIGINT NOT NULL,   -- the highest block both forks share (kept)
  depth        INTEGER NOT NULL,  -- blocks rolled back (fork_point + 1 .. fork_point + depth)
  old_hashes   BYTEA[] NOT NULL,  -- the orphaned blocks' hashes, from fork_point + 1 up
  new_hashes   BYTEA[] NOT NULL,  -- the canonical hashes at those heights when detected
  generation   BIGINT NOT NULL,   -- indexer_state 'reorg_generation' after this rollback
  leader_epoch BIGINT NOT NULL
);

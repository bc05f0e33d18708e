-- 004_reorg_fence: the fencing-token floor of a re-org (issue 10, store/rollback.h).
--
-- When the leader rolls back the blocks above a fork point it records the coordination Redis's
-- fence counter as read just before (fence_floor): every lease granted until then carries a token
-- at or below it, and a worker holding one may have fetched the old fork. The writer refuses a
-- range above a recorded fork point whose token is not above that re-org's floor (store/writer.h,
-- reason kReorgFencedReason), so a worker paused across the re-org cannot commit the old fork
-- afterwards, even where no stored neighbour would show the break. 0: no floor (a rollback made
-- without the fleet, e.g. by a test or by hand).
ALTER TABLE reorgs ADD COLUMN fence_floor BIGINT NOT NULL DEFAULT 0;
-- The writer's check: the re-orgs whose fork point is below a range's last block.
CREATE INDEX reorgs_fork_point ON reorgs (fork_point);

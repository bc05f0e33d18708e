-- 006_fence_owner: who wrote a range with its fence token (issue 16, store/writer.h).
--
-- A fencing token is unique while the coordination Redis keeps its counter. A failover to a
-- replica that lagged rolls the counter back (it is not lost: nothing reconciles it), so a new
-- lease can get a token another worker already used. The writer lets an equal token pass only
-- for the same owner (the same lease retrying after a commit whose reply was lost); another owner
-- with an equal token is refused as stale. NULL: written without an owner (`index`, or before
-- this column), which does not restrict.
ALTER TABLE indexed_ranges ADD COLUMN fence_owner TEXT;

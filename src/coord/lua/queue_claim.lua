-- queue_claim.lua: claims up to ARGV[3] tasks at the head of the pending list: moves them to the
-- processing list and creates a lease {worker, fencing token, expiry} for each in the same script
-- (apply_claim in queue_lib.lua, which Queue prepends to this file: Redis scripts cannot include
-- one another). Expiry is Redis TIME + ttl: no client clock is involved.
--
-- KEYS[1]  pending list
-- KEYS[2]  processing list
-- KEYS[3]  leases hash (task -> JSON lease)
-- KEYS[4]  fence counter string
-- KEYS[5]  the fence counter's data set (fence_lib.lua)
-- ARGV[1]  worker id (non-empty)
-- ARGV[2]  lease TTL in milliseconds (integer 1..10^12, queue_lib.lua max_lease_ttl_ms)
-- ARGV[3]  how many tasks at most (integer 1..1000)
-- Returns  {task, token, expires_ms, ...}: three elements per task claimed, pending's order,
--          tokens ascending; empty when pending is empty.
-- Errors   "queue_claim: ..." for bad arguments, before any write; "DATASET queue_claim: ..."
--          when the counter must be floored again first (fence_lib.lua).
-- needs: fence_lib.lua queue_lib.lua

local pending, processing, leases, fence, dataset = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local worker, ttl, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local bad, record = check_claim('queue_claim', fence, dataset, worker, ARGV[2], ARGV[3])
if bad then return bad end
return apply_claim(pending, processing, leases, fence, dataset, record, worker, ttl, count, {})

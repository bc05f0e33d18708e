-- queue_complete.lua: finishes a task, only for its owner (same worker and same token): removes
-- it from processing, the queued set and the attempts and expiries hashes, deletes its lease, and
-- records the range in the frontier's completed set (check_owner and apply_complete in
-- queue_lib.lua, which Queue prepends to this file). The caller has already committed the range
-- to PostgreSQL under the same token; a refusal here means another worker holds the task now (its
-- commit, fenced with a higher token, wins).
--
-- KEYS[1]  processing list
-- KEYS[2]  leases hash
-- KEYS[3]  queued set
-- KEYS[4]  attempts hash
-- KEYS[5]  completed sorted set
-- KEYS[6]  expiries hash
-- ARGV[1]  task "from-to"
-- ARGV[2]  worker id
-- ARGV[3]  fencing token
-- Returns  {1, 'ok'} when completed; {0, reason} when refused.
-- Errors   "queue_complete: ..." for a malformed task or corrupt lease, before any write.
-- needs: fence_lib.lua queue_lib.lua

local processing, leases, queued, attempts, completed, expiries =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local task, worker, token = ARGV[1], ARGV[2], tonumber(ARGV[3])
local from_s, bad = check_task('queue_complete', task)
if bad then return bad end
local refused = check_owner('queue_complete', leases, task, worker, token)
if refused then return refused end
apply_complete(processing, leases, queued, attempts, expiries, completed, task, from_s)
return {1, 'ok'}

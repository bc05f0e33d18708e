-- queue_complete_claim.lua: Complete then Claim in one script and one round trip, as a worker
-- does between two tasks: finishes the previous task exactly as queue_complete.lua does (owner
-- only), then claims the head of pending with a fresh lease exactly as queue_claim.lua does. The
-- logic is queue_lib.lua's (check_owner, apply_complete, check_claim, apply_claim), which Queue
-- prepends to this file, so the three scripts cannot drift apart.
--
-- A refused completion (not the owner: the janitor requeued the task and someone else holds it,
-- or a re-sent call whose first run completed it) still claims: the caller's old unit of work is
-- gone, but the caller is alive and may take new work. A corrupt lease or a bad argument is an
-- error before any write: neither the completion nor the claim happens.
--
-- KEYS[1]  pending list
-- KEYS[2]  processing list
-- KEYS[3]  leases hash
-- KEYS[4]  queued set
-- KEYS[5]  attempts hash
-- KEYS[6]  completed sorted set
-- KEYS[7]  expiries hash
-- KEYS[8]  fence counter string
-- KEYS[9]  the fence counter's data set (fence_lib.lua)
-- ARGV[1]  the task to complete, "from-to"
-- ARGV[2]  worker id (non-empty; the owner of ARGV[1] and of the new lease)
-- ARGV[3]  fencing token of ARGV[1]'s lease
-- ARGV[4]  TTL of the new lease in milliseconds (integer > 0)
-- Returns  {completed, reason} followed by the new lease {task, token, expires_ms} when pending
--          had a task: completed is 1 (reason 'ok') or 0 (reason: why it was refused). So
--          {1, 'ok', task, token, expires_ms}, {0, reason}, etc.
-- Errors   "queue_complete_claim: ..." for bad arguments or a corrupt lease, before any write;
--          "DATASET queue_complete_claim: ..." when the counter must be floored again before a
--          claim (fence_lib.lua): then neither happens, and the caller completes on its own.
-- needs: fence_lib.lua queue_lib.lua

local pending, processing, leases, queued, attempts, completed, expiries, fence, dataset =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local task, worker, token, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local script = 'queue_complete_claim'

-- Every check first (Lua does not roll back).
local from_s, bad = check_task(script, task)
if bad then return bad end
local record
bad, record = check_claim(script, fence, dataset, worker, ARGV[4])
if bad then return bad end
local out = check_owner(script, leases, task, worker, token)
if is_error(out) then return out end

if not out then
  apply_complete(processing, leases, queued, attempts, expiries, completed, task, from_s)
  out = {1, 'ok'}
end
local lease = apply_claim(pending, processing, leases, fence, dataset, record, worker, ttl)
if lease then
  out[3], out[4], out[5] = lease[1], lease[2], lease[3]
end
return out

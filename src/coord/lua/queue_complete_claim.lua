-- queue_complete_claim.lua: Complete then Claim in one script and one round trip, as a worker
-- does between two tasks: finishes the previous tasks exactly as queue_complete.lua does (owner
-- only), then claims up to ARGV[3] tasks at the head of pending with fresh leases exactly as
-- queue_claim.lua does. The logic is queue_lib.lua's (check_owner, apply_complete, check_claim,
-- apply_claim), which Queue prepends to this file, so the three scripts cannot drift apart.
--
-- A refused completion (not the owner: the janitor requeued the task and someone else holds it,
-- or a re-sent call whose first run completed it) still claims: the caller's old unit of work is
-- gone, but the caller is alive and may take new work. A corrupt lease or a bad argument is an
-- error before any write: neither the completions nor the claim happen.
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
-- ARGV[1]  worker id (non-empty; the owner of the tasks to complete and of the new leases)
-- ARGV[2]  TTL of the new leases in milliseconds (integer 1..10^12, as queue_claim.lua)
-- ARGV[3]  how many tasks to claim at most (integer 1..1000)
-- ARGV[4], ARGV[5], ...  the tasks to complete, each "from-to" followed by its lease's fencing
--          token (one pair at least, at most 1000)
-- Returns  {completed, reason} per task to complete, in ARGV's order, followed by the new leases
--          {task, token, expires_ms} as queue_claim.lua returns them (none when pending was
--          empty): completed is 1 (reason 'ok') or 0 (reason: why it was refused). So
--          {1, 'ok', task, token, expires_ms} for one of each, {0, reason} for one refused
--          completion and an empty pending, etc.
-- Errors   "queue_complete_claim: ..." for bad arguments or a corrupt lease, before any write;
--          "DATASET queue_complete_claim: ..." when the counter must be floored again before a
--          claim (fence_lib.lua): then nothing happens, and the caller completes on its own.
-- needs: fence_lib.lua queue_lib.lua

local pending, processing, leases, queued, attempts, completed, expiries, fence, dataset =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local worker, ttl, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local script = 'queue_complete_claim'

-- Every check first (Lua does not roll back).
local pairs_given = (#ARGV - 3) / 2
if pairs_given < 1 or pairs_given ~= math.floor(pairs_given) or pairs_given > max_claim_batch then
  return redis.error_reply(script .. ': want 1..' .. max_claim_batch ..
                           ' (task, token) pairs after the count, got ' .. (#ARGV - 3) ..
                           ' arguments')
end
-- out gets each verdict as it is checked: {1, 'ok'} for an owned task (completed below, once
-- every check passed), the refusal {0, reason} otherwise.
local froms, out = {}, {}
for i = 1, pairs_given do
  local from_s, bad = check_task(script, ARGV[2 + 2 * i])
  if bad then return bad end
  froms[i] = from_s
end
local bad, record = check_claim(script, fence, dataset, worker, ARGV[2], ARGV[3])
if bad then return bad end
for i = 1, pairs_given do
  local refused = check_owner(script, leases, ARGV[2 + 2 * i], worker, tonumber(ARGV[3 + 2 * i]))
  if is_error(refused) then return refused end
  refused = refused or {1, 'ok'}
  out[2 * i - 1] = refused[1]
  out[2 * i] = refused[2]
end

for i = 1, pairs_given do
  if out[2 * i - 1] == 1 then
    apply_complete(processing, leases, queued, attempts, expiries, completed, ARGV[2 + 2 * i],
                   froms[i])
  end
end
return apply_claim(pending, processing, leases, fence, dataset, record, worker, ttl, count, out)

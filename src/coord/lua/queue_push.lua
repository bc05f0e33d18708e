-- queue_push.lua: appends range tasks to the pending list, skipping every task that is already
-- known: pending or processing (the queued set), done (in the completed set, or wholly below the
-- frontier), or dead-lettered (retry those with queue_dlq_retry.lua). Running it twice with the
-- same tasks enqueues them once. Leader-only: fenced by the leader's epoch (leader_epoch_lib.lua).
-- needs: leader_epoch_lib.lua
--
-- KEYS[1]  pending list
-- KEYS[2]  queued set (every task in pending or processing)
-- KEYS[3]  completed sorted set (member "from-to")
-- KEYS[4]  frontier string (next block not known complete), may be missing
-- KEYS[5]  dlq hash (task -> dead letter)
-- KEYS[6]  leader epoch string (Keys::leader_epoch)
-- ARGV[1]  the caller's leader epoch (0: not fenced)
-- ARGV[2..] the tasks, each "from-to" with from <= to (decimal, at most 15 digits)
-- Returns  the number of tasks added.
-- Errors   "queue_push: ..." for a malformed task or frontier, STALE_LEADER_EPOCH for a deposed
--          leader; all before any write.

local pending, queued, completed, frontier_key, dlq, epoch_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- Check phase: parse everything first (Lua does not roll back).
local refused = check_leader_epoch('queue_push', epoch_key, ARGV[1])
if refused then return refused end
local tos = {}
for i = 2, #ARGV do
  local from_s, to_s = string.match(ARGV[i], '^(%d+)%-(%d+)$')
  if not from_s or #from_s > 15 or #to_s > 15 or tonumber(from_s) > tonumber(to_s) then
    return redis.error_reply('queue_push: malformed task ' .. tostring(ARGV[i]))
  end
  tos[i] = tonumber(to_s)
end
local frontier = nil
local stored = redis.call('GET', frontier_key)
if stored then
  if not string.match(stored, '^%d+$') then
    return redis.error_reply('queue_push: ' .. frontier_key .. ' holds ' .. stored)
  end
  frontier = tonumber(stored)
end

record_leader_epoch(epoch_key, ARGV[1])
local added = 0
for i = 2, #ARGV do
  local task = ARGV[i]
  local done = (frontier and tos[i] < frontier) or
               redis.call('ZSCORE', completed, task) or
               redis.call('HEXISTS', dlq, task) == 1
  if not done and redis.call('SADD', queued, task) == 1 then
    redis.call('RPUSH', pending, task)
    added = added + 1
  end
end
return added

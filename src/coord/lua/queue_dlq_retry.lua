-- queue_dlq_retry.lua: moves dead-lettered tasks back to the tail of the pending list with a
-- fresh attempt count and a fresh lease-expiry count. A task that was pushed again meanwhile
-- (already queued) only leaves the DLQ.
--
-- KEYS[1]  dlq hash
-- KEYS[2]  pending list
-- KEYS[3]  queued set
-- KEYS[4]  attempts hash
-- KEYS[5]  expiries hash
-- ARGV[1]  a task, or "*" for all
-- ARGV[2]  with "*": the most tasks to move in this call (integer >= 1)
-- Returns  the list of tasks moved out of the DLQ.
-- Errors   "queue_dlq_retry: ..." for a bad argument, before any write.

local dlq, pending, queued, attempts, expiries = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local which = ARGV[1]
local tasks = {}
if which == '*' then
  local limit = tonumber(ARGV[2])
  if not limit or limit < 1 or limit ~= math.floor(limit) then
    return redis.error_reply('queue_dlq_retry: bad limit ' .. tostring(ARGV[2]))
  end
  local all = redis.call('HKEYS', dlq)
  table.sort(all)
  for i = 1, math.min(limit, #all) do tasks[i] = all[i] end
elseif which and which ~= '' then
  if redis.call('HEXISTS', dlq, which) == 1 then tasks[1] = which end
else
  return redis.error_reply('queue_dlq_retry: missing task')
end

for _, task in ipairs(tasks) do
  redis.call('HDEL', dlq, task)
  redis.call('HDEL', attempts, task)
  redis.call('HDEL', expiries, task)
  if redis.call('SADD', queued, task) == 1 then redis.call('RPUSH', pending, task) end
end
return tasks

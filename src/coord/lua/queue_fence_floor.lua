-- queue_fence_floor.lua: raises the fencing-token counter to at least a floor, never lowers it,
-- and records the data set it is now valid on (fence_lib.lua). Redis keeps the counter only in
-- memory here; after it loses its data (FLUSHALL, a restart without persistence) INCR would start
-- again at 1, below tokens already recorded in PostgreSQL, and every new grant would be refused
-- by the fence; after a failover to a replica that lagged it would grant again tokens the old
-- primary granted. Reconciliation (node/reconcile.h) passes a floor above every token granted
-- before, from PostgreSQL, before any claim.
--
-- KEYS[1]  fence counter string
-- KEYS[2]  the counter's data set (Keys::fence_dataset)
-- ARGV[1]  floor (decimal integer >= 0)
-- ARGV[2]  "always", or "new-data-set": nothing is done when the counter exists and was floored
--          on this data set already (a restore another process made since the caller was refused)
-- Returns  {the counter after the call, 1 when floored (and the data set recorded) or 0}.
-- Errors   "queue_fence_floor: ..." for a bad argument or a corrupt counter, before any write.
-- needs: fence_lib.lua

local fence, dataset = KEYS[1], KEYS[2]
if not string.match(ARGV[1] or '', '^%d+$') or #ARGV[1] > 15 then
  return redis.error_reply('queue_fence_floor: bad floor ' .. tostring(ARGV[1]))
end
if ARGV[2] ~= 'always' and ARGV[2] ~= 'new-data-set' then
  return redis.error_reply('queue_fence_floor: bad mode ' .. tostring(ARGV[2]))
end
local floor = tonumber(ARGV[1])
local current = redis.call('GET', fence)
if current and not string.match(current, '^%d+$') then
  return redis.error_reply('queue_fence_floor: ' .. fence .. ' holds ' .. current)
end
local replid = server_replid()
if ARGV[2] == 'new-data-set' and current and replid ~= '' and
    redis.call('GET', dataset) == replid then
  return {tonumber(current), 0}
end
if replid ~= '' then redis.call('SET', dataset, replid) end
-- A missing counter is created even at floor 0, so that its absence keeps meaning "lost".
if current and tonumber(current) >= floor then return {tonumber(current), 1} end
redis.call('SET', fence, string.format('%d', floor))
return {floor, 1}

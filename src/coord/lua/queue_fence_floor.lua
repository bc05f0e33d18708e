-- queue_fence_floor.lua: raises the fencing-token counter to at least a floor, never lowers it.
-- Redis keeps the counter only in memory here; after it loses its data (FLUSHALL, a restart
-- without persistence) INCR would start again at 1, below tokens already recorded in
-- PostgreSQL, and every new grant would be refused by the fence. Reconciliation passes the
-- highest token found in PostgreSQL as the floor before any claim.
--
-- KEYS[1]  fence counter string
-- ARGV[1]  floor (decimal integer >= 0)
-- Returns  the counter after the call.
-- Errors   "queue_fence_floor: ..." for a bad argument or a corrupt counter, before any write.

local fence = KEYS[1]
if not string.match(ARGV[1] or '', '^%d+$') or #ARGV[1] > 15 then
  return redis.error_reply('queue_fence_floor: bad floor ' .. tostring(ARGV[1]))
end
local floor = tonumber(ARGV[1])
local current = redis.call('GET', fence)
if current and not string.match(current, '^%d+$') then
  return redis.error_reply('queue_fence_floor: ' .. fence .. ' holds ' .. current)
end
-- A missing counter is created even at floor 0, so that its absence keeps meaning "lost".
if current and tonumber(current) >= floor then return tonumber(current) end
redis.call('SET', fence, string.format('%d', floor))
return floor

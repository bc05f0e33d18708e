-- queue_claim.lua: claims the task at the head of the pending list: moves it to the processing
-- list and creates its lease {worker, fencing token, expiry} in the same script, so there is no
-- moment in which a task sits in processing without a lease (the janitor would requeue it) or is
-- leased without being in processing. The token comes from INCR of the fence counter, so every
-- grant gets a token higher than every earlier grant (as long as Redis keeps its data; see
-- Queue::FloorFenceCounter). Expiry is Redis TIME + ttl: no client clock is involved.
--
-- KEYS[1]  pending list
-- KEYS[2]  processing list
-- KEYS[3]  leases hash (task -> JSON lease)
-- KEYS[4]  fence counter string
-- ARGV[1]  worker id (non-empty)
-- ARGV[2]  lease TTL in milliseconds (integer > 0)
-- Returns  {task, token, expires_ms}, or nil when pending is empty.
-- Errors   "queue_claim: ..." for bad arguments, before any write.

local pending, processing, leases, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local worker = ARGV[1]
local ttl = tonumber(ARGV[2])
if not worker or worker == '' then return redis.error_reply('queue_claim: empty worker id') end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('queue_claim: bad ttl ' .. tostring(ARGV[2]))
end
local counter = redis.call('GET', fence)
if counter and not string.match(counter, '^%d+$') then
  return redis.error_reply('queue_claim: ' .. fence .. ' holds ' .. counter)
end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local task = redis.call('LMOVE', pending, processing, 'LEFT', 'RIGHT')
if not task then return nil end
local token = redis.call('INCR', fence)
local expires = now_ms + ttl
redis.call('HSET', leases, task,
           cjson.encode({worker = worker, token = token, expires_ms = expires}))
return {task, token, expires}

-- queue_janitor.lua: requeues tasks whose lease is gone or expired (by Redis TIME), atomically,
-- and never a task whose lease is live. Bounded work: it looks at no more than ARGV[1] tasks of
-- the processing list per call, starting at the head. A live task it looks at is rotated to the
-- tail, so successive calls walk the whole list however long it is. An expired task goes to the
-- HEAD of pending: it is the oldest outstanding work, and the frontier waits for it.
--
-- Safety: a task is requeued only if its lease field is missing or its expiry is <= TIME now; the
-- owner of a live lease keeps it. A worker whose lease expired and was requeued is refused by
-- renew/complete/fail (its lease field is gone or carries a newer token) and by the fence in
-- PostgreSQL.
--
-- KEYS[1]  pending list
-- KEYS[2]  processing list
-- KEYS[3]  leases hash
-- ARGV[1]  the most tasks to look at (integer >= 1)
-- Returns  the list of requeued tasks.
-- Errors   "queue_janitor: ..." for a bad argument. A corrupt lease is treated as gone.

local pending, processing, leases = KEYS[1], KEYS[2], KEYS[3]
local limit = tonumber(ARGV[1])
if not limit or limit < 1 or limit ~= math.floor(limit) then
  return redis.error_reply('queue_janitor: bad limit ' .. tostring(ARGV[1]))
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local n = redis.call('LLEN', processing)
if n > limit then n = limit end
local requeued = {}
for _ = 1, n do
  local task = redis.call('LINDEX', processing, 0)
  if not task then break end
  local live = false
  local raw = redis.call('HGET', leases, task)
  if raw then
    local ok, lease = pcall(cjson.decode, raw)
    live = ok and type(lease) == 'table' and type(lease.expires_ms) == 'number' and
           lease.expires_ms > now_ms
  end
  if live then
    redis.call('LMOVE', processing, processing, 'LEFT', 'RIGHT')
  else
    redis.call('LMOVE', processing, pending, 'LEFT', 'LEFT')
    redis.call('HDEL', leases, task)
    requeued[#requeued + 1] = task
  end
end
return requeued

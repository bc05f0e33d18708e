-- queue_fail.lua: records a failed attempt of a task, only for its owner (same worker and same
-- token). The lease is released either way. Below max_attempts the task goes to the back of the
-- pending list; at max_attempts it leaves the queue for the dead-letter hash with the last
-- error, the attempt count and the worker (and its lease-expiry count is dropped with it: a dead
-- task's counts start again from zero when `dlq retry` requeues it).
--
-- KEYS[1]  pending list
-- KEYS[2]  processing list
-- KEYS[3]  leases hash
-- KEYS[4]  queued set
-- KEYS[5]  attempts hash
-- KEYS[6]  dlq hash
-- KEYS[7]  expiries hash
-- ARGV[1]  task
-- ARGV[2]  worker id
-- ARGV[3]  fencing token
-- ARGV[4]  error text (the caller bounds its length)
-- ARGV[5]  max attempts (integer >= 1)
-- Returns  {1, attempts} requeued; {2, attempts} dead-lettered; {0, reason} refused.
-- Errors   "queue_fail: ..." for bad arguments or a corrupt lease, before any write.

local pending, processing, leases, queued, attempts, dlq, expiries =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local task, worker, token, err = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local max_attempts = tonumber(ARGV[5])
if not max_attempts or max_attempts < 1 or max_attempts ~= math.floor(max_attempts) then
  return redis.error_reply('queue_fail: bad max_attempts ' .. tostring(ARGV[5]))
end
local raw = redis.call('HGET', leases, task)
if not raw then return {0, 'no lease for ' .. task} end
local ok, lease = pcall(cjson.decode, raw)
if not ok or type(lease) ~= 'table' then
  return redis.error_reply('queue_fail: corrupt lease for ' .. task .. ': ' .. raw)
end
-- mutation: lease-owner
-- (core/mutation.h: GAPLESS_MUTATION=lease-owner drops the lines up to the end marker, so anyone
-- may fail a task whose lease exists; check_owner in queue_lib.lua too.)
if lease.worker ~= worker or lease.token ~= token then
  return {0, task .. ' is leased to ' .. tostring(lease.worker) .. ' with token ' ..
             tostring(lease.token)}
end
-- end mutation: lease-owner
local n = tonumber(redis.call('HGET', attempts, task) or '0')
if not n then return redis.error_reply('queue_fail: corrupt attempts for ' .. task) end
n = n + 1
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('LREM', processing, 1, task)
redis.call('HDEL', leases, task)
if n < max_attempts then
  redis.call('HSET', attempts, task, n)
  redis.call('RPUSH', pending, task)
  return {1, n}
end
redis.call('HDEL', attempts, task)
redis.call('HDEL', expiries, task)
redis.call('SREM', queued, task)
redis.call('HSET', dlq, task,
           cjson.encode({error = err, attempts = n, worker = worker, failed_at_ms = now_ms}))
return {2, n}

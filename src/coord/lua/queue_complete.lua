-- queue_complete.lua: finishes a task, only for its owner (same worker and same token): removes
-- it from processing, the queued set and the attempts hash, deletes its lease, and records the
-- range in the frontier's completed set (score = from block, member "from-to"). The caller has
-- already committed the range to PostgreSQL under the same token; a refusal here means another
-- worker holds the task now (its commit, fenced with a higher token, wins).
--
-- KEYS[1]  processing list
-- KEYS[2]  leases hash
-- KEYS[3]  queued set
-- KEYS[4]  attempts hash
-- KEYS[5]  completed sorted set
-- ARGV[1]  task "from-to"
-- ARGV[2]  worker id
-- ARGV[3]  fencing token
-- Returns  {1, 'ok'} when completed; {0, reason} when refused.
-- Errors   "queue_complete: ..." for a malformed task or corrupt lease, before any write.

local processing, leases, queued, attempts, completed = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local task, worker, token = ARGV[1], ARGV[2], tonumber(ARGV[3])
local from_s = string.match(task, '^(%d+)%-%d+$')
if not from_s then return redis.error_reply('queue_complete: malformed task ' .. task) end
local raw = redis.call('HGET', leases, task)
if not raw then return {0, 'no lease for ' .. task} end
local ok, lease = pcall(cjson.decode, raw)
if not ok or type(lease) ~= 'table' then
  return redis.error_reply('queue_complete: corrupt lease for ' .. task .. ': ' .. raw)
end
if lease.worker ~= worker or lease.token ~= token then
  return {0, task .. ' is leased to ' .. tostring(lease.worker) .. ' with token ' ..
             tostring(lease.token)}
end

redis.call('LREM', processing, 1, task)
redis.call('HDEL', leases, task)
redis.call('SREM', queued, task)
redis.call('HDEL', attempts, task)
redis.call('ZADD', completed, from_s, task)
return {1, 'ok'}

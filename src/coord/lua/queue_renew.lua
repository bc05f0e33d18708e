-- queue_renew.lua: extends a lease, only for its owner (same worker and same token). A lease past
-- its expiry that the janitor has not requeued yet is still the owner's (no other grant exists
-- for the task), so it is renewed; once the janitor requeued it the lease is gone and renewal is
-- refused.
--
-- KEYS[1]  leases hash (task -> JSON lease)
-- ARGV[1]  task
-- ARGV[2]  worker id
-- ARGV[3]  fencing token
-- ARGV[4]  new TTL in milliseconds from now (integer > 0)
-- Returns  {1, expires_ms} when renewed; {0, reason} when refused (not the owner, no lease).
-- Errors   "queue_renew: ..." for bad arguments or a corrupt lease, before any write.

local leases = KEYS[1]
local task, worker, token = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('queue_renew: bad ttl ' .. tostring(ARGV[4]))
end
local raw = redis.call('HGET', leases, task)
if not raw then return {0, 'no lease for ' .. task} end
local ok, lease = pcall(cjson.decode, raw)
if not ok or type(lease) ~= 'table' then
  return redis.error_reply('queue_renew: corrupt lease for ' .. task .. ': ' .. raw)
end
-- mutation: lease-owner
-- (core/mutation.h: GAPLESS_MUTATION=lease-owner drops the lines up to the end marker, so anyone
-- may renew a task whose lease exists; check_owner in queue_lib.lua too.)
if lease.worker ~= worker or lease.token ~= token then
  return {0, task .. ' is leased to ' .. tostring(lease.worker) .. ' with token ' ..
             tostring(lease.token)}
end
-- end mutation: lease-owner

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
lease.expires_ms = now_ms + ttl
redis.call('HSET', leases, task, cjson.encode(lease))
return {1, lease.expires_ms}

-- registry_beat.lua: one heartbeat of a fleet process (coord/registry.h). Refreshes the process's
-- heartbeat key and registry entry, and prunes a bounded number of entries of processes that
-- stopped beating, so the registry stays bounded by the live fleet even when nobody runs
-- `gapless status` (every process start adds an entry under a new worker id).
--
-- KEYS[1]  the process's heartbeat key (string with a TTL: the process is alive while it exists)
-- KEYS[2]  the registry hash: worker -> entry JSON (Registry::Encode)
-- KEYS[3]  the registry's expiry index: sorted set worker -> expiry of its entry (Redis TIME, ms)
-- ARGV[1]  worker id (non-empty)
-- ARGV[2]  the entry JSON (non-empty)
-- ARGV[3]  ttl in milliseconds (integer > 0), of the heartbeat key and of the entry
-- ARGV[4]  prune limit: at most this many expired entries are removed by this call (integer >= 0)
-- Returns  the number of expired entries removed.
-- Errors   "registry_beat: ..." for a bad argument, raised before any write.
--
-- Pruning: an entry whose expiry is in the past belongs to a process that has not beaten for a
-- whole TTL; its heartbeat key, written with the same TTL at the same moment, is gone too. The
-- work per call is bounded by ARGV[4]. Each beat adds at most one entry and removes up to ARGV[4]
-- dead ones, so dead entries drain as long as the fleet's survivors beat more often than
-- processes die divided by ARGV[4]. Time comes from Redis TIME only.

local heartbeat = KEYS[1]
local registry = KEYS[2]
local expiries = KEYS[3]
local worker = ARGV[1]
local entry = ARGV[2]
local ttl = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])

if not worker or worker == '' then return redis.error_reply('registry_beat: empty worker id') end
if not entry or entry == '' then return redis.error_reply('registry_beat: empty entry') end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('registry_beat: bad ttl ' .. tostring(ARGV[3]))
end
if not limit or limit < 0 or limit ~= math.floor(limit) then
  return redis.error_reply('registry_beat: bad prune limit ' .. tostring(ARGV[4]))
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('SET', heartbeat, '1', 'PX', ttl)
redis.call('HSET', registry, worker, entry)
redis.call('ZADD', expiries, string.format('%d', now + ttl), worker)

local pruned = 0
if limit > 0 then
  -- This process's own expiry is now + ttl > now: it is never among them.
  local dead = redis.call('ZRANGEBYSCORE', expiries, '-inf', string.format('(%d', now), 'LIMIT', 0,
                                 limit)
  for _, w in ipairs(dead) do
    redis.call('HDEL', registry, w)
    redis.call('ZREM', expiries, w)
    pruned = pruned + 1
  end
end
return pruned

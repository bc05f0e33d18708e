-- leader_lock.lua: takes or renews the single-Redis lock of the leader role (seeder, janitor,
-- frontier) for the holder of `token`. Liveness only: every action of the role is safe when two
-- processes briefly both believe they hold it (Push is idempotent, the janitor requeues only
-- expired leases, the frontier scripts are monotonic), so a paused holder that outlives its TTL
-- does no harm. Expiry is PX, i.e. Redis time.
--
-- KEYS[1]  the lock string (Keys::leader_lock)
-- ARGV[1]  the caller's token (non-empty, random per process)
-- ARGV[2]  TTL in milliseconds (integer > 0)
-- Returns  1 renewed (the lock was still ours), 2 acquired (it was free: a new term, e.g. after
--          our own expiry or after Redis lost its data), 0 held by someone else.
-- Errors   "leader_lock: ..." for bad arguments, before any write.

local lock, token = KEYS[1], ARGV[1]
local ttl = tonumber(ARGV[2])
if not token or token == '' then return redis.error_reply('leader_lock: empty token') end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('leader_lock: bad ttl ' .. tostring(ARGV[2]))
end
local holder = redis.call('GET', lock)
if holder == token then
  redis.call('PEXPIRE', lock, ttl)
  return 1
end
if holder then return 0 end
redis.call('SET', lock, token, 'PX', ttl)
return 2

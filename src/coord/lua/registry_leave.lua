-- registry_leave.lua: removes one process from the registry (coord/registry.h): its heartbeat
-- key, its entry and its expiry, together. Used on graceful shutdown, and by Registry::List() for
-- an entry whose heartbeat is gone.
--
-- KEYS[1]  the process's heartbeat key
-- KEYS[2]  the registry hash: worker -> entry JSON
-- KEYS[3]  the registry's expiry index: sorted set worker -> expiry
-- ARGV[1]  worker id (non-empty)
-- Returns  1 if the process had an entry, else 0.
-- Errors   "registry_leave: ..." for a bad argument, raised before any write.

local heartbeat = KEYS[1]
local registry = KEYS[2]
local expiries = KEYS[3]
local worker = ARGV[1]

if not worker or worker == '' then return redis.error_reply('registry_leave: empty worker id') end

redis.call('DEL', heartbeat)
redis.call('ZREM', expiries, worker)
return redis.call('HDEL', registry, worker)

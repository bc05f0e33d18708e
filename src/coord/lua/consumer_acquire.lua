-- consumer_acquire.lua: takes the processing key of one event for one consumer attempt
-- (events/consumer.h, seed 003's "virtual state"): the key exists only while some consumer works
-- on the event and expires by itself if that consumer dies.
--
-- KEYS[1]  the processing key "{prefix}:processing:{event_id}"
-- ARGV[1]  token: unique to this attempt (consumer instance + sequence number), non-empty
-- ARGV[2]  TTL in milliseconds (integer >= 1)
-- Returns  1 when the key is now held with this token (set now, or already set by an earlier
--          send of this same call: resending after a lost reply is idempotent); 0 when another
--          token holds it.
-- Errors   "consumer_acquire: ..." for a bad argument, raised before any write.

-- needs: consumer_lib.lua

local key = KEYS[1]
local token = ARGV[1]
local bad = check_token('consumer_acquire', token)
if bad then return bad end
local ttl
ttl, bad = parse_ttl('consumer_acquire', ARGV[2])
if bad then return bad end

local holder = redis.call('GET', key)
if holder == token then
  redis.call('PEXPIRE', key, ttl)
  return 1
end
if holder then return 0 end
redis.call('SET', key, token, 'PX', ttl)
return 1

-- consumer_release.lua: drops the processing key of one event if this attempt still holds it
-- (events/consumer.h). A consumer whose key expired while it worked (it ran longer than the TTL)
-- must not delete the key of the consumer that took the event over, hence the token check.
--
-- KEYS[1]  the processing key "{prefix}:processing:{event_id}"
-- ARGV[1]  token of the attempt that acquired it (non-empty)
-- Returns  1 if the key was held with this token and is now deleted, else 0. Idempotent.
-- Errors   "consumer_release: ..." for a bad argument.

-- needs: consumer_lib.lua

local key = KEYS[1]
local token = ARGV[1]
local bad = check_token('consumer_release', token)
if bad then return bad end

if redis.call('GET', key) == token then
  return redis.call('DEL', key)
end
return 0

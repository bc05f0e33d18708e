-- consumer_release.lua: drops the processing key of one event if this attempt still holds it
-- (events/consumer.h). A consumer whose key expired while it worked (it ran longer than the TTL)
-- must not delete the key of the consumer that took the event over, hence the token check.
--
-- KEYS[1]  the processing key "{prefix}:processing:{event_id}"
-- ARGV[1]  token of the attempt that acquired it (non-empty)
-- Returns  1 if the key was held with this token and is now deleted, else 0. Idempotent.
-- Errors   "consumer_release: ..." for a bad argument.

local key = KEYS[1]
local token = ARGV[1]

if not token or token == '' then return redis.error_reply('consumer_release: empty token') end
if redis.call('GET', key) == token then
  return redis.call('DEL', key)
end
return 0

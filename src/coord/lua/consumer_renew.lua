-- consumer_renew.lua: extends the processing key of one event while the attempt that holds it
-- still runs (events/consumer.h: the poll thread renews every held key each third of the TTL).
-- It never creates the key: a renewal that races with the attempt's own release must not bring
-- back a key nobody holds, which would keep the event from every consumer until it expired.
--
-- KEYS[1]  the processing key "{prefix}:processing:{event_id}"
-- ARGV[1]  token of the attempt that acquired it (non-empty)
-- ARGV[2]  TTL in milliseconds (integer >= 1)
-- Returns  1 when the key is held with this token and its TTL is now ARGV[2]; 0 otherwise (it
--          was released, expired, or another token holds it). Idempotent.
-- Errors   "consumer_renew: ..." for a bad argument, raised before any write.

-- needs: consumer_lib.lua

local key = KEYS[1]
local token = ARGV[1]
local bad = check_token('consumer_renew', token)
if bad then return bad end
local ttl
ttl, bad = parse_ttl('consumer_renew', ARGV[2])
if bad then return bad end

if redis.call('GET', key) ~= token then return 0 end
redis.call('PEXPIRE', key, ttl)
return 1

-- consumer_lib.lua: the argument checks of the processing-key scripts (consumer_acquire.lua,
-- consumer_renew.lua, consumer_release.lua: events/consumer.h), written once. Not a script of its
-- own: those scripts name it on a "-- needs:" line and LoadScript prepends it. Local functions
-- only; it reads no KEYS or ARGV by itself.

-- nil when `token` is a usable attempt token (non-empty), else the error reply to return.
local function check_token(script, token)
  if not token or token == '' then return redis.error_reply(script .. ': empty token') end
  return nil
end

-- The TTL in milliseconds `arg` names (an integer >= 1), or nil and the error reply to return.
local function parse_ttl(script, arg)
  local ttl = tonumber(arg)
  if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
    return nil, redis.error_reply(script .. ': ttl must be an integer >= 1 ms, got ' ..
                                  tostring(arg))
  end
  return ttl, nil
end

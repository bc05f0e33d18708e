-- rate_limit.lua: one admission decision of the fleet-wide sliding-window log (seed 002), for one
-- RPC endpoint. Every process that calls the endpoint runs this before each request; the sorted
-- set holds one member per admission of the last window, scored by its admission time.
--
-- KEYS[1]  the endpoint's sorted set (member = request id, score = admission time in
--          microseconds from Redis TIME)
-- ARGV[1]  limit: admissions allowed in any window (integer >= 1)
-- ARGV[2]  window in milliseconds (integer >= 1)
-- ARGV[3]  member: a unique id for this request (non-empty)
-- Returns  0 when the request is admitted (the member was added, or was already admitted by an
--          earlier attempt of this same call: retrying with the same member is idempotent);
--          otherwise the wait in milliseconds (>= 1) until enough admissions have left the window
--          for this caller's limit to admit one more.
-- Errors   "rate_limit: ..." for bad arguments or a key of the wrong type, raised before any write.
--
-- Time comes only from Redis TIME, so the clocks of the callers do not matter. An admission at
-- time s counts while now - s < window. The key's TTL is reset to the window at each admission, so
-- the key disappears one window after the last admission and never holds more than `limit`
-- members (more only if callers pass different limits, then at most the largest).

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local member = ARGV[3]

-- Every check comes before the first write: Lua scripts do not roll back.
if not limit or limit < 1 or limit ~= math.floor(limit) then
  return redis.error_reply('rate_limit: limit must be an integer >= 1, got ' .. tostring(ARGV[1]))
end
if not window_ms or window_ms < 1 or window_ms ~= math.floor(window_ms) then
  return redis.error_reply('rate_limit: window must be an integer >= 1 ms, got ' ..
                           tostring(ARGV[2]))
end
if not member or member == '' then
  return redis.error_reply('rate_limit: empty member')
end
local key_type = redis.call('TYPE', key)['ok']
if key_type ~= 'none' and key_type ~= 'zset' then
  return redis.error_reply('rate_limit: ' .. key .. ' holds a ' .. key_type .. ', not a zset')
end

-- Redis < 5 replicates scripts verbatim and refuses a write after TIME without this; on newer
-- servers effects replication is the default and this is a no-op.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window_us = window_ms * 1000

-- A retry of a call whose reply was lost: already admitted, do not count it twice.
local previous = redis.call('ZSCORE', key, member)
if previous and now - tonumber(previous) < window_us then
  return 0
end

-- Drop admissions that left the window: score <= now - window.
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window_us))
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, string.format('%d', now), member)
  redis.call('PEXPIRE', key, window_ms)
  return 0
end

-- Full: admitting one more needs count - limit + 1 admissions to leave, the oldest first, so wait
-- for the one at rank count - limit (0-based) to leave the window.
local rank = count - limit
local entry = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
local wait_us = tonumber(entry[2]) + window_us - now
local wait_ms = math.ceil(wait_us / 1000)
if wait_ms < 1 then wait_ms = 1 end
return wait_ms

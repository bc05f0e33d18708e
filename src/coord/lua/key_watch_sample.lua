-- key_watch_sample.lua: records the key count of this Redis (DBSIZE) with the server's time in a
-- bounded sample list, unless the newest sample is younger than the minimum interval (a status
-- run in a `watch` loop adds one sample a minute, not one a second), and returns the list.
--
-- KEYS[1]  sample list, newest first, entries "<time ms>:<key count>"
-- ARGV[1]  the most samples to keep (integer >= 2)
-- ARGV[2]  minimum interval between samples, ms (integer >= 0)
-- ARGV[3]  TTL of the list, ms (integer >= 1), renewed with each sample
-- Returns  {now_ms, recorded (1 or 0), sample, sample, ...} newest first.
-- Refuses (CORRUPT, before any write) a newest entry that is not "<digits>:<digits>".

local samples = KEYS[1]
local max_samples = tonumber(ARGV[1])
local min_interval = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if not max_samples or max_samples < 2 or not min_interval or min_interval < 0 or not ttl or
    ttl < 1 then
  return redis.error_reply('key_watch_sample: bad arguments')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local newest = redis.call('LINDEX', samples, 0)
local due = true
if newest then
  local at = string.match(newest, '^(%d+):%d+$')
  if not at then
    return redis.error_reply('CORRUPT key_watch_sample.lua: sample "' .. newest .. '" in ' .. samples)
  end
  due = now - tonumber(at) >= min_interval
end
local recorded = 0
if due then
  redis.call('LPUSH', samples, now .. ':' .. redis.call('DBSIZE'))
  redis.call('LTRIM', samples, 0, max_samples - 1)
  redis.call('PEXPIRE', samples, ttl)
  recorded = 1
end
local out = {now, recorded}
for _, s in ipairs(redis.call('LRANGE', samples, 0, -1)) do
  out[#out + 1] = s
end
return out

-- queue_leases.lua: lists the live leases for `gapless status`, decoded server-side, with the
-- server's clock so the caller can show how long each has left. Read-only.
--
-- KEYS[1]  leases hash (task -> JSON {"worker", "token", "expires_ms"})
-- ARGV[1]  the most entries to return (integer >= 1)
-- Returns  {now_ms, task, worker, token, expires_ms, task, ...} sorted by task; a corrupt entry is
--          listed with worker "?" and token -1.

local leases = KEYS[1]
local limit = tonumber(ARGV[1])
if not limit or limit < 1 then
  return redis.error_reply('queue_leases: bad limit ' .. tostring(ARGV[1]))
end
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
local tasks = redis.call('HKEYS', leases)
table.sort(tasks)
for i = 1, math.min(limit, #tasks) do
  local ok, l = pcall(cjson.decode, redis.call('HGET', leases, tasks[i]))
  out[#out + 1] = tasks[i]
  if ok and type(l) == 'table' then
    out[#out + 1] = tostring(l.worker or '?')
    out[#out + 1] = tonumber(l.token) or -1
    out[#out + 1] = tonumber(l.expires_ms) or 0
  else
    out[#out + 1] = '?'
    out[#out + 1] = -1
    out[#out + 1] = 0
  end
end
return out

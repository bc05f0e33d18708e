-- queue_dlq_list.lua: lists dead letters, sorted by task, decoded server-side so clients need
-- no JSON parser. Read-only.
--
-- KEYS[1]  dlq hash (task -> JSON {"error", "attempts", "worker", "failed_at_ms"})
-- ARGV[1]  the most entries to return (integer >= 1)
-- Returns  a flat list: task, error, attempts, worker, failed_at_ms, task, ... (a corrupt entry
--          is listed with its raw text as the error and attempts -1).

local dlq = KEYS[1]
local limit = tonumber(ARGV[1])
if not limit or limit < 1 then
  return redis.error_reply('queue_dlq_list: bad limit ' .. tostring(ARGV[1]))
end
local tasks = redis.call('HKEYS', dlq)
table.sort(tasks)
local out = {}
for i = 1, math.min(limit, #tasks) do
  local raw = redis.call('HGET', dlq, tasks[i])
  local ok, d = pcall(cjson.decode, raw)
  if ok and type(d) == 'table' then
    out[#out + 1] = tasks[i]
    out[#out + 1] = tostring(d.error or '')
    out[#out + 1] = tonumber(d.attempts) or -1
    out[#out + 1] = tostring(d.worker or '')
    out[#out + 1] = tonumber(d.failed_at_ms) or 0
  else
    out[#out + 1] = tasks[i]
    out[#out + 1] = raw
    out[#out + 1] = -1
    out[#out + 1] = ''
    out[#out + 1] = 0
  end
end
return out

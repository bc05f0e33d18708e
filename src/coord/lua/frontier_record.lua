-- frontier_record.lua: records a completed range [from, to] for the frontier (frontier_advance.lua)
-- unless a re-org was followed since the caller read the re-org generation (issue 16).
--
-- A producer of completions outside the queue (the Kafka worker, node/kafka_worker.h) reads the
-- generation that the coordination Redis has followed (Keys::reorg_generation, set by
-- reorg_reset.lua) BEFORE it looks at PostgreSQL and writes, and passes it here. reorg_reset.lua
-- drops every completed range above its fork point and bumps the generation in one step, so a
-- completion of the old fork either lands before that step (and is dropped by it) or after (and
-- is refused here): it can never lift the frontier over a rolled-back hole. A refused completion
-- loses nothing: the rows, if still committed, are found by the leader's PostgreSQL catch-up.
--
-- KEYS[1]  the completed-ranges sorted set (Keys::completed)
-- KEYS[2]  the re-org generation followed (Keys::reorg_generation; absent = 0)
-- ARGV[1]  from (decimal >= 0), ARGV[2] to (decimal >= from)
-- ARGV[3]  the generation the caller read (decimal), or '' for unfenced (tests, tools)
-- Returns  1 recorded, 0 refused (the generation moved)
-- Errors   "frontier_record: ..." for a bad argument or a non-numeric stored generation, before
--          any write.

local completed, gen_key = KEYS[1], KEYS[2]
local function decimal(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end
local from, to = decimal(ARGV[1]), decimal(ARGV[2])
if not from or not to or from > to then
  return redis.error_reply('frontier_record: bad range ' .. tostring(ARGV[1]) .. '-' ..
                           tostring(ARGV[2]))
end
if ARGV[3] ~= '' then
  local expected = decimal(ARGV[3])
  if not expected then return redis.error_reply('frontier_record: bad generation ' .. ARGV[3]) end
  local stored = decimal(redis.call('GET', gen_key) or '0')
  if not stored then return redis.error_reply('frontier_record: ' .. gen_key .. ' is not a number') end
  if stored ~= expected then return 0 end
end
redis.call('ZADD', completed, from, ARGV[1] .. '-' .. ARGV[2])
return 1

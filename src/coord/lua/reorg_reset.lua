-- reorg_reset.lua: brings the coordination state back below a re-org's fork point after the
-- leader rolled PostgreSQL back (store/rollback.h; node/reconcile.h FollowRollbacks). Leader-only,
-- fenced by the leader's epoch. Idempotent by generation: the PostgreSQL re-org generation it
-- follows is stored, and a generation at or below the stored one changes nothing.
-- needs: leader_epoch_lib.lua
--
-- What moves, all in this one step:
--  - the frontier (the next block not known complete) goes down to max(start, fork point + 1)
--    when it was above: it is no longer forward-only, and the generation below is what keeps a
--    late call from the old fork from pushing it back up (frontier_advance.lua only moves over
--    ranges recorded as completed, and the completed ranges above the fork point go here);
--  - every completed range reaching above the fork point is removed, so the seeder pushes those
--    heights again (queue_push.lua skips completed and below-frontier tasks only);
--  - the generation is recorded.
--  - every task in processing that reaches above the fork point loses its lease and goes back to
--    the head of pending (attempts unchanged): its holder may have fetched the old fork, and its
--    completion is now refused (not the owner), so a range committed before the rollback can never
--    be recorded as completed after this step; a completion recorded before it is dropped above.
--    Its holder's write, if it comes after the rollback, is refused by PostgreSQL's re-org fence
--    (store/writer.h). Pending tasks stay: they are ranges, fetched from the node when claimed.
--
-- KEYS[1]  frontier string (Keys::frontier)
-- KEYS[2]  completed sorted set (Keys::completed, members "from-to", score from)
-- KEYS[3]  the generation followed (Keys::reorg_generation)
-- KEYS[4]  leader epoch string (Keys::leader_epoch)
-- KEYS[5]  pending list, KEYS[6] processing list, KEYS[7] leases hash (Keys::pending etc.)
-- ARGV[1]  the caller's leader epoch (0: not fenced)
-- ARGV[2]  the fork point (decimal >= 0)
-- ARGV[3]  the PostgreSQL re-org generation after the rollback (decimal >= 1)
-- ARGV[4]  start: the job's first block (decimal >= 0), a floor for the frontier
-- Returns  {applied (1 or 0), frontier after (decimal string, '' when none is stored),
--           completed ranges removed, leases revoked}
-- Errors   "reorg_reset: ..." for a bad argument or a corrupt stored value, STALE_LEADER_EPOCH for
--          a deposed leader; all before any write.

local frontier_key, completed, gen_key, epoch_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local pending, processing, leases = KEYS[5], KEYS[6], KEYS[7]
local refused = check_leader_epoch('reorg_reset', epoch_key, ARGV[1])
if refused then return refused end
local function decimal(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end
local fork, gen, start = decimal(ARGV[2]), decimal(ARGV[3]), decimal(ARGV[4])
if not fork or not gen or gen < 1 or not start then
  return redis.error_reply('reorg_reset: bad arguments ' .. tostring(ARGV[2]) .. ' ' ..
                           tostring(ARGV[3]) .. ' ' .. tostring(ARGV[4]))
end
local stored_gen = decimal(redis.call('GET', gen_key) or '0')
if not stored_gen then return redis.error_reply('reorg_reset: ' .. gen_key .. ' is not a number') end
local stored = redis.call('GET', frontier_key)
if stored and not decimal(stored) then
  return redis.error_reply('reorg_reset: ' .. frontier_key .. ' holds ' .. stored)
end
if stored_gen >= gen then return {0, stored or '', 0, 0} end
local gone = {}
for _, m in ipairs(redis.call('ZRANGE', completed, 0, -1)) do
  local to = string.match(m, '^%d+%-(%d+)$')
  if not to then return redis.error_reply('reorg_reset: malformed completed range ' .. m) end
  if tonumber(to) > fork then gone[#gone + 1] = m end
end
local revoked = {}
for _, task in ipairs(redis.call('LRANGE', processing, 0, -1)) do
  local to = string.match(task, '^%d+%-(%d+)$')
  if not to then return redis.error_reply('reorg_reset: malformed task ' .. task) end
  if tonumber(to) > fork then revoked[#revoked + 1] = task end
end

-- Checks done; the writes.
record_leader_epoch(epoch_key, ARGV[1])
local floor = math.max(start, fork + 1)
if stored and tonumber(stored) > floor then
  stored = tostring(floor)
  redis.call('SET', frontier_key, stored)
end
for i = 1, #gone, 1000 do
  redis.call('ZREM', completed, unpack(gone, i, math.min(#gone, i + 999)))
end
for _, task in ipairs(revoked) do
  redis.call('LREM', processing, 0, task)
  redis.call('HDEL', leases, task)
  redis.call('LPUSH', pending, task)
end
redis.call('SET', gen_key, ARGV[3])
return {1, stored or '', #gone, #revoked}

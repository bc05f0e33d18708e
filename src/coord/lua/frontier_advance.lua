-- frontier_advance.lua: advances the contiguous frontier over completed ranges (seed 000) and
-- trims the completed set below it.
--
-- The frontier is stored as the NEXT block not yet known complete (so a job starting at block 0
-- needs no -1): every block in [start, frontier) is complete. Completed ranges are members
-- "from-to" (inclusive bounds, decimal) of a sorted set scored by `from`; they may arrive in any
-- order, twice, or overlapping.
--
-- KEYS[1]  the completed-ranges sorted set
-- KEYS[2]  the frontier string (decimal next block)
-- KEYS[3]  leader epoch string (Keys::leader_epoch; leader-only: leader_epoch_lib.lua)
-- ARGV[1]  start: the first block of the indexing job (decimal integer >= 0). Also a floor: the
--          frontier is never below it (reconciliation passes the frontier found in PostgreSQL).
-- ARGV[2]  the caller's leader epoch (0: not fenced); STALE_LEADER_EPOCH when a newer one acted
-- Returns  the new frontier (integer): max(stored frontier, start), advanced over every range
--          that begins at or below it. It never decreases.
-- Errors   raised before any write, so a corrupt entry stops the frontier rather than being
--          skipped:
--          "CORRUPT frontier_advance: ..." for a bad stored frontier or a malformed member (not
--          "from-to", from > to, or a score that differs from `from`). CORRUPT is the error code
--          of corrupt stored state (kCorruptStateError in coord/redis.h): RedisConn maps it to
--          DataLoss, so no caller parses this text.
--          "frontier_advance: ..." for a bad argument (a caller's bug: Internal).
--
-- Consumed ranges (all members with from < the new frontier: contiguous ones, duplicates, and
-- ranges wholly below) are removed, so the set holds only ranges beyond a gap: it stays bounded
-- by the out-of-order window of the workers, and it disappears when the frontier catches up.

-- needs: leader_epoch_lib.lua

local completed = KEYS[1]
local frontier_key = KEYS[2]
local epoch_key = KEYS[3]
local refused = check_leader_epoch('frontier_advance', epoch_key, ARGV[2] or '0')
if refused then return refused end

local function decimal(s)
  if type(s) ~= 'string' or not string.match(s, '^%d+$') or #s > 15 then return nil end
  return tonumber(s)
end

local start = decimal(ARGV[1])
if not start then
  return redis.error_reply('frontier_advance: start must be a decimal integer >= 0, got ' ..
                           tostring(ARGV[1]))
end

local stored = redis.call('GET', frontier_key)
local next_block = start
if stored then
  local f = decimal(stored)
  if not f then
    return redis.error_reply('CORRUPT frontier_advance: ' .. frontier_key .. ' holds ' ..
                             stored .. ', not a block number')
  end
  if f > next_block then next_block = f end
end

-- Read phase: walk the members with score <= next_block in score order. Each extends next_block
-- to its end + 1 when it reaches past it; as next_block grows, the walk continues from the same
-- offset with the higher bound (nothing is written during the walk, so ranks do not move).
local offset = 0
local batch_size = 512
while true do
  local batch = redis.call('ZRANGEBYSCORE', completed, '-inf', string.format('%d', next_block),
                           'WITHSCORES', 'LIMIT', offset, batch_size)
  local n = #batch / 2
  if n == 0 then break end
  for i = 1, #batch, 2 do
    local member = batch[i]
    local from_s, to_s = string.match(member, '^(%d+)%-(%d+)$')
    local from = decimal(from_s)
    local to = decimal(to_s)
    if not from or not to or from > to then
      return redis.error_reply('CORRUPT frontier_advance: malformed range ' .. member ..
                               ' in ' .. completed)
    end
    if tonumber(batch[i + 1]) ~= from then
      return redis.error_reply('CORRUPT frontier_advance: range ' .. member .. ' has score ' ..
                               batch[i + 1] .. ' in ' .. completed)
    end
    if to + 1 > next_block then next_block = to + 1 end
  end
  offset = offset + n
end

-- Write phase. Every member read has from < next_block (one with from == next_block would have
-- moved it past), and every member with from < next_block was read.
record_leader_epoch(epoch_key, ARGV[2] or '0')
if offset > 0 then
  redis.call('ZREMRANGEBYSCORE', completed, '-inf', '(' .. string.format('%d', next_block))
end
local next_s = string.format('%d', next_block)
if stored ~= next_s then
  redis.call('SET', frontier_key, next_s)
end
return next_block

-- election_write_head.lua: appends head entries (height, hash, parent hash) to one lock node's
-- head log, fenced by the lock owner and the epoch, and renews the lease: the lease is renewed only
-- by this work (an idle chain re-writes its top entry, which answers EXISTS and still renews). A
-- leader also retakes this node's lock when it is free and no newer promotion came through it, so
-- a leader promoted on a bare quorum (or a node back from a restart) gets all its nodes back.
--
-- Safety (DESIGN "Leader election and the fenced head log"): an entry is committed when a quorum
-- of nodes holds it. Two quorums share a node, so the height check below keeps two different
-- hashes at one height from both reaching a quorum; the owner and epoch checks keep a paused
-- leader's writes out once another has been promoted. Every check runs before the first write.
--
-- Height uniqueness is O(log n) through a sorted set indexed by height (never a scan of the
-- stream), and heights trimmed out of the window are remembered by a floor: a write at or below
-- the floor is skipped (never re-added), so trimming cannot reopen a height.
--
-- KEYS[1]  the lock                                   Keys::election_lock
-- KEYS[2]  the epoch                                  Keys::election_epoch
-- KEYS[3]  the log stream (height, hash, parent, epoch)   Keys::head_log
-- KEYS[4]  the height index: sorted set, score height, member "height:hash:parent:epoch"
--                                                     Keys::head_heights
-- KEYS[5]  the trim floor (integer; heights <= floor were trimmed; absent: none was)   Keys::head_floor
-- KEYS[6]  the log incarnation (a random value set on the first write; a node that lost its data
--          gets a new one, which tells readers to re-read it from the start)   Keys::head_incarnation
-- ARGV[1]  owner id
-- ARGV[2]  the leader's token (epoch, integer >= 1)
-- ARGV[3]  lock TTL in milliseconds (integer > 0)
-- ARGV[4]  window: heights kept (integer > 0); the stream is trimmed to about as many entries
-- ARGV[5..] entries, three arguments each: height (decimal), hash, parent hash; heights ascending
-- Returns  {'OK', written, existing, skipped}   written new, already present with the same hash,
--                                              skipped at or below the floor
--          {'NOT_OWNER', holder or ''}   held by another; or free but a newer epoch is here ('')
--          {'STALE_EPOCH', epoch}
--          {'CONFLICT', height, member}         another hash is stored at height (member as in
--                                              KEYS[4]); nothing was written
-- Errors   "election_write_head: ..." for bad arguments, before any write.

local lock, epoch_key, log, heights, floor_key, incarnation =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local owner, token, ttl, window = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function bad(what) return redis.error_reply('election_write_head: ' .. what) end
if not owner or owner == '' then return bad('empty owner') end
if not token or token < 1 or token ~= math.floor(token) then return bad('bad token ' .. tostring(ARGV[2])) end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then return bad('bad ttl ' .. tostring(ARGV[3])) end
if not window or window <= 0 or window ~= math.floor(window) then
  return bad('bad window ' .. tostring(ARGV[4]))
end
if (#ARGV - 4) % 3 ~= 0 then return bad('entries come in threes (height, hash, parent)') end

-- 1. Owner: the lock on this node is ours, or free and retakable (below). Held by another: refuse.
local holder = redis.call('GET', lock)
if holder and holder ~= owner then return {'NOT_OWNER', holder} end
-- 2. Epoch: no newer leader has been promoted through this node.
local epoch = tonumber(redis.call('GET', epoch_key) or '0')
if not epoch then return bad(epoch_key .. ' is not a number') end
if not holder then
  -- A free lock (a promotion that raced the previous leader's release here, a node that restarted
  -- empty) is retaken only if no promotion has moved this node's epoch past ours: every node a
  -- newer leader was promoted through carries its higher epoch, so a deposed leader can never
  -- gather a quorum this way. A newer epoch on a free node is not a deposition (a promotion that
  -- failed elsewhere moves it too): the node is just not ours.
  if token < epoch then return {'NOT_OWNER', ''} end
elseif token < epoch then
  return {'STALE_EPOCH', tostring(epoch)}
end
-- 3. Entries: well-formed, ascending, and no other hash at any of their heights.
local floor = tonumber(redis.call('GET', floor_key) or '-1') or -1
local new_entries, existing, skipped = {}, 0, 0
local last = -1
local top = nil
for i = 5, #ARGV, 3 do
  local h_text, hash, parent = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if not string.match(h_text, '^%d+$') then return bad('bad height ' .. h_text) end
  local h = tonumber(h_text)
  if h <= last then return bad('heights must ascend: ' .. h_text .. ' after ' .. last) end
  last = h
  if hash == '' or string.find(hash, ':', 1, true) or string.find(parent, ':', 1, true) then
    return bad('bad hash at height ' .. h_text)
  end
  if h <= floor then
    skipped = skipped + 1
  else
    local found = redis.call('ZRANGEBYSCORE', heights, h, h, 'LIMIT', 0, 1)
    if #found > 0 then
      local stored_hash = string.match(found[1], '^%d+:([^:]*):')
      if stored_hash ~= hash then return {'CONFLICT', h_text, found[1]} end
      existing = existing + 1
    else
      new_entries[#new_entries + 1] = {h_text, hash, parent}
    end
  end
  top = h
end

-- Checks done; the writes. 4. Retake a free lock; heal this node's epoch up to the token.
if token > epoch then redis.call('SET', epoch_key, ARGV[2]) end
if #new_entries > 0 and redis.call('EXISTS', incarnation) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', incarnation, t[1] .. '.' .. t[2])
end
-- 5. Append.
for _, e in ipairs(new_entries) do
  redis.call('XADD', log, '*', 'height', e[1], 'hash', e[2], 'parent', e[3], 'epoch', ARGV[2])
  redis.call('ZADD', heights, tonumber(e[1]), e[1] .. ':' .. e[2] .. ':' .. e[3] .. ':' .. ARGV[2])
end
-- 6. Bounded: keep the window below the highest height written here.
if #new_entries > 0 and top ~= nil and top - window > floor then
  redis.call('ZREMRANGEBYSCORE', heights, '-inf', top - window)
  redis.call('SET', floor_key, tostring(top - window))
end
if #new_entries > 0 then redis.call('XTRIM', log, 'MAXLEN', '~', window) end
-- 7. The lease, renewed (or retaken) by the work.
if holder then redis.call('PEXPIRE', lock, ttl) else redis.call('SET', lock, owner, 'PX', ttl) end
return {'OK', #new_entries, existing, skipped}

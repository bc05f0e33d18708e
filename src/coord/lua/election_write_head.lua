-- election_write_head.lua: appends head entries (height, hash, parent hash) to one lock node's
-- head log, fenced by the lock owner and the epoch, and renews the lease: the lease is renewed only
-- by this work (an idle chain re-writes its top entry, which answers EXISTS and still renews). A
-- leader also retakes this node's lock when it is free and no newer promotion came through it, so
-- a leader promoted on a bare quorum (or a node back from a restart) gets all its nodes back.
--
-- Safety (DESIGN "Leader election and the fenced head log"): an entry is committed when a quorum
-- of nodes holds it. Two quorums share a node, so the height check below (step 4; the one the
-- head-log-height mutation drops) keeps two different hashes at one height from both reaching a
-- quorum; the owner and epoch checks keep a paused leader's writes out once another has been
-- promoted. Every check runs before the first write.
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
-- KEYS[7]  the fork: "generation:fork point" of the last re-org truncation applied here (absent:
--          generation 0)                      Keys::head_fork
-- ARGV[1]  owner id
-- ARGV[2]  the leader's token (epoch, integer >= 1)
-- ARGV[3]  lock TTL in milliseconds (integer > 0)
-- ARGV[4]  window: heights kept (integer > 0); the stream is trimmed to about as many entries
-- ARGV[5]  the leader's fork generation (integer >= 0)
-- ARGV[6]  its fork point (integer; -1 with generation 0)
-- ARGV[7..] entries, three arguments each: height (decimal), hash, parent hash; heights ascending
-- Returns  {'OK', written, existing, skipped}   written new, already present with the same hash,
--                                              skipped at or below the floor
--          {'NOT_OWNER', holder or ''}   held by another; or free but a newer epoch is here ('')
--          {'STALE_EPOCH', epoch}
--          {'FORK_BEHIND', 'generation:point'}  this node applied a newer truncation than the
--                                              writer knows; nothing was written
--          {'CONFLICT', height, member}         another hash is stored at height (member as in
--                                              KEYS[4]); nothing was written
--
-- Re-orgs (issue 10): the head log is append-only within a fork generation. A re-org is a new
-- generation: the leader found where its log and the node's chain last agree (the fork point) and
-- writes with generation + 1. A node still at a lower generation first drops every entry above
-- the fork point, or all of them when it is more than one generation behind (height index and
-- stream; the stream is rebuilt from the index and the node gets a new incarnation, so readers
-- re-read it whole), then takes the entries. A node at a higher
-- generation refuses: a leader that has not seen the latest truncation must not write, so the old
-- fork's entries can never again reach a quorum. Readers count a node behind the highest
-- generation they see only where it still holds that fork (VotesUpTo, election.h).
-- Errors   "election_write_head: ..." for bad arguments, before any write.

local lock, epoch_key, log, heights, floor_key, incarnation, fork_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local owner, token, ttl, window = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function bad(what) return redis.error_reply('election_write_head: ' .. what) end
if not owner or owner == '' then return bad('empty owner') end
if not token or token < 1 or token ~= math.floor(token) then return bad('bad token ' .. tostring(ARGV[2])) end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then return bad('bad ttl ' .. tostring(ARGV[3])) end
if not window or window <= 0 or window ~= math.floor(window) then
  return bad('bad window ' .. tostring(ARGV[4]))
end
local fork_gen, fork_point = tonumber(ARGV[5]), tonumber(ARGV[6])
if not fork_gen or fork_gen < 0 or fork_gen ~= math.floor(fork_gen) then
  return bad('bad fork generation ' .. tostring(ARGV[5]))
end
if not fork_point or fork_point < -1 or fork_point ~= math.floor(fork_point) then
  return bad('bad fork point ' .. tostring(ARGV[6]))
end
if (#ARGV - 6) % 3 ~= 0 then return bad('entries come in threes (height, hash, parent)') end

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
-- 3. Fork: the same generation, or an older one to truncate first; a newer one refuses.
local stored_fork = redis.call('GET', fork_key) or '0:-1'
local stored_gen = tonumber(string.match(stored_fork, '^(%d+):')) or 0
if stored_gen > fork_gen then return {'FORK_BEHIND', stored_fork} end
local truncate = stored_gen < fork_gen
-- The height above which a truncation drops entries: the fork point; everything (-1) when this
-- node missed more than one generation, since the truncations it missed may have had lower points
-- nobody remembers (a node emptied so is one that lost its data: repair re-proposes from the
-- others).
local cut = fork_point
if stored_gen + 1 < fork_gen then cut = -1 end
-- 4. Entries: well-formed, ascending, and no other hash at any of their heights (above the fork
-- point of a truncation, none: they are about to go).
local floor = tonumber(redis.call('GET', floor_key) or '-1') or -1
local new_entries, existing, skipped = {}, 0, 0
local last = -1
local top = nil
for i = 7, #ARGV, 3 do
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
    local found = {}
    if not (truncate and h > cut) then
      found = redis.call('ZRANGEBYSCORE', heights, h, h, 'LIMIT', 0, 1)
    end
    local stored_hash = found[1] and string.match(found[1], '^%d+:([^:]*):')
    -- mutation: head-log-height
    -- (core/mutation.h: GAPLESS_MUTATION=head-log-height drops the lines up to the end marker,
    -- so a second hash at a stored height is appended beside the first.)
    if found[1] and stored_hash ~= hash then return {'CONFLICT', h_text, found[1]} end
    -- end mutation: head-log-height
    if stored_hash == hash then
      existing = existing + 1
    else
      new_entries[#new_entries + 1] = {h_text, hash, parent}
    end
  end
  top = h
end

-- Checks done; the writes. 5. Retake a free lock; heal this node's epoch up to the token.
if token > epoch then redis.call('SET', epoch_key, ARGV[2]) end
-- 6. Truncate: drop the entries above the cut, rebuild the stream from what is left, and
-- start a new incarnation so readers re-read this node whole.
if truncate then
  redis.call('ZREMRANGEBYSCORE', heights, '(' .. cut, '+inf')
  redis.call('DEL', log)
  for _, m in ipairs(redis.call('ZRANGE', heights, 0, -1)) do
    local h, hash, parent, e = string.match(m, '^(%d+):([^:]*):([^:]*):(%d+)$')
    if h then redis.call('XADD', log, '*', 'height', h, 'hash', hash, 'parent', parent, 'epoch', e) end
  end
  local t = redis.call('TIME')
  redis.call('SET', incarnation, t[1] .. '.' .. t[2] .. '/fork' .. fork_gen)
  redis.call('SET', fork_key, fork_gen .. ':' .. fork_point)
end
if #new_entries > 0 and redis.call('EXISTS', incarnation) == 0 then
  local t = redis.call('TIME')
  redis.call('SET', incarnation, t[1] .. '.' .. t[2])
end
-- 7. Append.
for _, e in ipairs(new_entries) do
  redis.call('XADD', log, '*', 'height', e[1], 'hash', e[2], 'parent', e[3], 'epoch', ARGV[2])
  redis.call('ZADD', heights, tonumber(e[1]), e[1] .. ':' .. e[2] .. ':' .. e[3] .. ':' .. ARGV[2])
end
-- 8. Bounded: keep the window below the highest height written here.
if #new_entries > 0 and top ~= nil and top - window > floor then
  redis.call('ZREMRANGEBYSCORE', heights, '-inf', top - window)
  redis.call('SET', floor_key, tostring(top - window))
end
if #new_entries > 0 then redis.call('XTRIM', log, 'MAXLEN', '~', window) end
-- 9. The lease, renewed (or retaken) by the work.
if holder then redis.call('PEXPIRE', lock, ttl) else redis.call('SET', lock, owner, 'PX', ttl) end
return {'OK', #new_entries, existing, skipped}

-- election_promote.lua: one lock node's part of a promotion (coord/election.h). Takes the leader
-- lock if it is free and increments this node's epoch, in one script, so two candidates racing for
-- a free lock cannot both pass on one node (SET NX), and the epoch moves only when the lock
-- changes hands. The caller is leader when a quorum of nodes answered OK; its token is the highest
-- epoch among them, and it must persist that token on a quorum (election_renew.lua heals lower
-- epochs up) before using it anywhere outside the lock nodes (DESIGN: a max of INCRs is not
-- monotonic across leaders until persisted).
--
-- KEYS[1]  the lock (string, owner id, PX)           Keys::election_lock
-- KEYS[2]  the epoch (integer)                        Keys::election_epoch
-- KEYS[3]  the leader's metadata (hash owner, epoch, since_ms)   Keys::election_meta
-- ARGV[1]  the candidate's owner id (non-empty, unique per process)
-- ARGV[2]  lock TTL in milliseconds (integer > 0)
-- Returns  {'OK', epoch}              the lock is ours; epoch is this node's new epoch
--          {'LOCK_HELD', holder, epoch}   someone holds it (maybe we do: the caller compares)
-- Errors   "election_promote: ..." for bad arguments or a corrupt epoch, before any write.

local lock, epoch_key, meta = KEYS[1], KEYS[2], KEYS[3]
local owner, ttl = ARGV[1], tonumber(ARGV[2])
if not owner or owner == '' then return redis.error_reply('election_promote: empty owner') end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('election_promote: bad ttl ' .. tostring(ARGV[2]))
end
local epoch = redis.call('GET', epoch_key)
if epoch and not string.match(epoch, '^%d+$') then
  return redis.error_reply('election_promote: ' .. epoch_key .. ' holds ' .. epoch)
end
local holder = redis.call('GET', lock)
if holder then return {'LOCK_HELD', holder, epoch or '0'} end

-- Checks done; the writes.
redis.call('SET', lock, owner, 'PX', ttl)
local new_epoch = redis.call('INCR', epoch_key)
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', meta, 'owner', owner, 'epoch', new_epoch, 'since_ms', now_ms)
return {'OK', tostring(new_epoch)}

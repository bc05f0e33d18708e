-- election_renew.lua: renew-if-owner on one lock node, with epoch healing. Used once right after a
-- promotion, to persist the leader's token (the highest epoch of its promotion quorum) on a quorum
-- before the token is used as a fencing token anywhere else, and by a leader that has no head
-- entry to write yet. Ordinary renewals happen through election_write_head.lua (the lease is
-- renewed by work).
--
-- KEYS[1]  the lock            Keys::election_lock
-- KEYS[2]  the epoch           Keys::election_epoch
-- KEYS[3]  the metadata hash   Keys::election_meta
-- ARGV[1]  owner id
-- ARGV[2]  the leader's token (epoch, integer >= 1)
-- ARGV[3]  lock TTL in milliseconds (integer > 0)
-- Returns  {'OK', token}                 renewed; this node's epoch is now the token
--          {'NOT_OWNER', holder or ''}   the lock expired or belongs to someone else
--          {'STALE_EPOCH', epoch}        this node saw a newer epoch: a newer leader exists
-- Errors   "election_renew: ..." for bad arguments, before any write.

local lock, epoch_key, meta = KEYS[1], KEYS[2], KEYS[3]
local owner, token, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not owner or owner == '' then return redis.error_reply('election_renew: empty owner') end
if not token or token < 1 or token ~= math.floor(token) then
  return redis.error_reply('election_renew: bad token ' .. tostring(ARGV[2]))
end
if not ttl or ttl <= 0 or ttl ~= math.floor(ttl) then
  return redis.error_reply('election_renew: bad ttl ' .. tostring(ARGV[3]))
end
local holder = redis.call('GET', lock)
if holder ~= owner then return {'NOT_OWNER', holder or ''} end
local epoch = tonumber(redis.call('GET', epoch_key) or '0')
if not epoch then return redis.error_reply('election_renew: ' .. epoch_key .. ' is not a number') end
if token < epoch then return {'STALE_EPOCH', tostring(epoch)} end

-- Checks done; the writes.
if token > epoch then redis.call('SET', epoch_key, ARGV[2]) end
redis.call('HSET', meta, 'epoch', ARGV[2])
redis.call('PEXPIRE', lock, ttl)
return {'OK', ARGV[2]}

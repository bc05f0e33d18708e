-- range_lock: take, extend or release one range's lock, by its owner only (coord/range_lock.h).
--
-- KEYS[1]  the range's lock (Keys::range_lock)
-- KEYS[2]  acquire: the fencing-token counter (Keys::fence_counter);
--          reclaim: the heartbeat key of the holder (Keys::heartbeat(ARGV[2]))
-- KEYS[3]  acquire: the fence counter's data set (Keys::fence_dataset, fence_lib.lua)
-- ARGV[1]  "acquire" | "extend" | "release" | "reclaim"
-- ARGV[2]  the owner (the worker's identity); reclaim: the holder the caller saw
-- ARGV[3]  ttl in ms (acquire, extend)
--
-- acquire: SET NX PX; when the owner already holds it, the TTL is renewed. Returns a fresh
--          fencing token (INCR of KEYS[2], > 0) when the owner holds the lock afterwards, 0 when
--          another owner does. The token orders this holding after every earlier grant, of a
--          lock or of a queue lease, so the writer's fence refuses an older holder's commit.
--          The error DATASET, before any write, when the counter must be floored again first
--          (fence_lib.lua).
-- extend:  renews the TTL only while the owner holds it. 1, or 0 (lost: expired or taken).
-- release: deletes only the owner's lock. 1 when deleted, 0 otherwise.
-- reclaim: deletes the lock when it is still held by ARGV[2] and that holder's heartbeat is gone
--          (the reclaimer: a dead worker's lock is freed before its TTL). 1 when deleted.
-- Every check comes before the write; the lock always carries a TTL.
-- needs: fence_lib.lua
local op, owner = ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
if (op == 'acquire' or op == 'extend') and (ttl == nil or ttl <= 0) then
  return redis.error_reply('ERR range_lock: ARGV[3] (ttl ms) must be a positive number')
end
local holder = redis.call('GET', KEYS[1])
if op == 'acquire' then
  if holder ~= false and holder ~= owner then return 0 end
  if KEYS[2] == nil or KEYS[3] == nil then
    return redis.error_reply('ERR range_lock: acquire needs KEYS[2] and KEYS[3] (the fence ' ..
                             'counter and its data set)')
  end
  local bad, record = check_fence_dataset('range_lock', KEYS[2], KEYS[3])
  if bad then return bad end
  redis.call('SET', KEYS[1], owner, 'PX', ttl)
  return grant_token(KEYS[2], KEYS[3], record)
elseif op == 'extend' then
  if holder ~= owner then return 0 end
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
elseif op == 'release' then
  if holder ~= owner then return 0 end
  redis.call('DEL', KEYS[1])
  return 1
elseif op == 'reclaim' then
  if holder ~= owner or KEYS[2] == nil then return 0 end
  if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  redis.call('DEL', KEYS[1])
  return 1
end
return redis.error_reply('ERR range_lock: unknown operation ' .. tostring(op))

-- range_lock: take, extend or release one range's lock, by its owner only (coord/range_lock.h).
--
-- KEYS[1]  the range's lock (Keys::range_lock)
-- ARGV[1]  "acquire" | "extend" | "release"
-- ARGV[2]  the owner (the worker's identity)
-- ARGV[3]  ttl in ms (acquire, extend)
--
-- acquire: SET NX PX; when the owner already holds it, the TTL is renewed. Returns 1 when the
--          owner holds the lock afterwards, 0 when another owner does.
-- extend:  renews the TTL only while the owner holds it. 1, or 0 (lost: expired or taken).
-- release: deletes only the owner's lock. 1 when deleted, 0 otherwise.
-- Every check comes before the write; the lock always carries a TTL.
local op, owner = ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
if op ~= 'release' and (ttl == nil or ttl <= 0) then
  return redis.error_reply('ERR range_lock: ARGV[3] (ttl ms) must be a positive number')
end
local holder = redis.call('GET', KEYS[1])
if op == 'acquire' then
  if holder == false then
    redis.call('SET', KEYS[1], owner, 'PX', ttl)
    return 1
  end
  if holder == owner then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return 1
  end
  return 0
elseif op == 'extend' then
  if holder ~= owner then return 0 end
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
elseif op == 'release' then
  if holder ~= owner then return 0 end
  redis.call('DEL', KEYS[1])
  return 1
end
return redis.error_reply('ERR range_lock: unknown operation ' .. tostring(op))

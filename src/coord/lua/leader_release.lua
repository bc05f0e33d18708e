-- leader_release.lua: releases the leader lock, only if `token` still holds it (a holder whose
-- lock expired and was taken by another process must not delete the new holder's lock).
--
-- KEYS[1]  the lock string (Keys::leader_lock)
-- ARGV[1]  the caller's token
-- Returns  1 released, 0 not ours (absent or held by someone else).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0

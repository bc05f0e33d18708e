-- election_release.lua: release-if-owner on one lock node (graceful stepdown, and the clean-up of
-- a promotion that did not reach a quorum). The epoch is left alone: the next promotion moves it.
--
-- KEYS[1]  the lock   Keys::election_lock
-- ARGV[1]  owner id
-- Returns  {'OK'} released, {'NOT_OWNER', holder or ''} not ours (nothing done).

local holder = redis.call('GET', KEYS[1])
if not ARGV[1] or ARGV[1] == '' or holder ~= ARGV[1] then return {'NOT_OWNER', holder or ''} end
redis.call('DEL', KEYS[1])
return {'OK'}

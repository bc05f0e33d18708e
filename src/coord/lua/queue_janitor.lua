-- queue_janitor.lua: requeues tasks whose lease is gone or expired (by Redis TIME), atomically,
-- and never a task whose lease is live. Bounded work: it looks at no more than ARGV[1] tasks of
-- the processing list per call, starting at the head. A live task it looks at is rotated to the
-- tail, so successive calls walk the whole list however long it is. An expired task goes to the
-- HEAD of pending: it is the oldest outstanding work, and the frontier waits for it.
--
-- Poison ranges: every requeue counts in the expiries hash, and the requeue that reaches
-- ARGV[2] sends the task to the dead-letter hash instead (error "lease expired N times ...",
-- attempts = N, worker = the last lease holder). Without that, a range that kills every worker
-- that takes it (a block that runs the process out of memory) would circulate forever, killing
-- the fleet one worker at a time, and the frontier would wait for it forever without anyone
-- being told. The count is separate from the failure attempts of queue_fail.lua and its bound is
-- higher: a worker that reports a failure was alive to do so, while an honest range loses leases
-- to deliberate kills (chaos tests, deploys) and stalls. Complete and the DLQ drop the count;
-- dlq retry resets it.
--
-- Safety: a task is requeued or dead-lettered only if its lease field is missing or its expiry is
-- <= TIME now; the owner of a live lease keeps it. A worker whose lease expired and was requeued
-- is refused by renew/complete/fail (its lease field is gone or carries a newer token) and by the
-- fence in PostgreSQL. Each count goes with moving the task out of processing, so running the
-- script again (a re-sent call after a lost answer, two leaders) never counts one expiry twice.
--
-- KEYS[1]  pending list
-- KEYS[2]  processing list
-- KEYS[3]  leases hash
-- KEYS[4]  queued set
-- KEYS[5]  attempts hash
-- KEYS[6]  expiries hash (task -> lease expiries so far)
-- KEYS[7]  dlq hash
-- KEYS[8]  leader epoch string (Keys::leader_epoch; leader-only: leader_epoch_lib.lua)
-- ARGV[1]  the most tasks to look at (integer >= 1)
-- ARGV[2]  max expiries: the expiry that reaches it dead-letters the task (integer >= 1)
-- ARGV[3]  the caller's leader epoch (0: not fenced)
-- Returns  a flat list, per requeued or dead-lettered task: task, 1 (requeued) or 2
--          (dead-lettered), expiries so far (this one included), last lease holder ('' when the
--          lease was missing or corrupt).
-- Errors   "queue_janitor: ..." for a bad argument, STALE_LEADER_EPOCH for a deposed leader,
--          before any write. A corrupt lease is
--          treated as gone; a corrupt count as 0.

-- needs: leader_epoch_lib.lua

local pending, processing, leases, queued, attempts, expiries, dlq, epoch_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local refused = check_leader_epoch('queue_janitor', epoch_key, ARGV[3])
if refused then return refused end
local limit = tonumber(ARGV[1])
if not limit or limit < 1 or limit ~= math.floor(limit) then
  return redis.error_reply('queue_janitor: bad limit ' .. tostring(ARGV[1]))
end
local max_expiries = tonumber(ARGV[2])
if not max_expiries or max_expiries < 1 or max_expiries ~= math.floor(max_expiries) then
  return redis.error_reply('queue_janitor: bad max_expiries ' .. tostring(ARGV[2]))
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
record_leader_epoch(epoch_key, ARGV[3])

local n = redis.call('LLEN', processing)
if n > limit then n = limit end
local out = {}
for _ = 1, n do
  local task = redis.call('LINDEX', processing, 0)
  if not task then break end
  local live, holder = false, ''
  local raw = redis.call('HGET', leases, task)
  if raw then
    local ok, lease = pcall(cjson.decode, raw)
    if ok and type(lease) == 'table' then
      live = type(lease.expires_ms) == 'number' and lease.expires_ms > now_ms
      if type(lease.worker) == 'string' then holder = lease.worker end
    end
  end
  if live then
    redis.call('LMOVE', processing, processing, 'LEFT', 'RIGHT')
  else
    local count = (tonumber(redis.call('HGET', expiries, task) or '0') or 0) + 1
    redis.call('HDEL', leases, task)
    if count < max_expiries then
      redis.call('HSET', expiries, task, count)
      redis.call('LMOVE', processing, pending, 'LEFT', 'LEFT')
      out[#out + 1] = task
      out[#out + 1] = 1
    else
      -- Leaves the queue as queue_fail.lua's dead letters do: out of processing and the queued
      -- set, counts dropped (dlq retry starts them again), one dead letter with the last holder.
      redis.call('LPOP', processing)
      redis.call('SREM', queued, task)
      redis.call('HDEL', attempts, task)
      redis.call('HDEL', expiries, task)
      redis.call('HSET', dlq, task, cjson.encode({
        error = string.format('lease expired %d times without completing (the workers holding ' ..
                              'it died or stalled)', count),
        attempts = count, worker = holder, failed_at_ms = now_ms}))
      out[#out + 1] = task
      out[#out + 1] = 2
    end
    out[#out + 1] = count
    out[#out + 1] = holder
  end
end
return out

-- queue_lib.lua: the lease logic that claim and complete share, written once. It is not a
-- script of its own: Redis scripts cannot include one another, so queue_claim.lua,
-- queue_complete.lua and queue_complete_claim.lua name it on a "-- needs:" line, after
-- fence_lib.lua (whose functions the claim uses), and LoadScript (redis.h) sends each with these
-- files prepended. It only defines local functions; it reads no KEYS or ARGV and writes nothing.
-- (So the line numbers in a Lua runtime error of those scripts count from the top of fence_lib.)
--
-- Conventions: a check_* function returns nil when all is well, otherwise the reply the script
-- returns as is (redis.error_reply for bad arguments or corrupt state, {0, reason} for a refusal);
-- every check runs before any write, because Lua does not roll back. The apply_* functions write.

-- Redis TIME in milliseconds: the only clock the queue uses (no client clock is involved).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function is_error(reply)
  return type(reply) == 'table' and reply.err ~= nil
end

-- The most tasks one claim may take (Queue::kMaxClaimBatch): it bounds the arguments of the
-- HSET below (Lua's stack takes a few thousand).
local max_claim_batch = 1000

-- The longest lease TTL a claim grants (about 31 years). A TTL is a number of the caller's, and
-- inf, or one large enough that Redis TIME + ttl leaves the integers that cjson's 14 digits (the
-- lease) and the integer reply keep exactly, would fail only at cjson.encode, after the tasks
-- moved and their tokens were taken.
local max_lease_ttl_ms = 1000000000000

-- Claim arguments: worker id (non-empty), TTL (integer ms in 1..max_lease_ttl_ms), how many
-- tasks (an integer in 1..max_claim_batch), and a fence counter that is missing or a decimal integer (INCRBY on
-- anything else would fail after the tasks moved) and valid on this data set (fence_lib.lua,
-- which every script that needs this file needs first). Returns the refusal or nil, and then the
-- data set to record with the grant (for apply_claim).
local function check_claim(script, fence, dataset, worker, ttl_arg, count_arg)
  local ttl = tonumber(ttl_arg)
  if not worker or worker == '' then return redis.error_reply(script .. ': empty worker id') end
  if not ttl or ttl <= 0 or ttl > max_lease_ttl_ms or ttl ~= math.floor(ttl) then
    return redis.error_reply(script .. ': bad ttl ' .. tostring(ttl_arg))
  end
  local count = tonumber(count_arg)
  if not count or count < 1 or count > max_claim_batch or count ~= math.floor(count) then
    return redis.error_reply(script .. ': bad count ' .. tostring(count_arg))
  end
  local counter = redis.call('GET', fence)
  if counter and not string.match(counter, '^%d+$') then
    return redis.error_reply(script .. ': ' .. fence .. ' holds ' .. counter)
  end
  return check_fence_dataset(script, fence, dataset, counter ~= false)
end

-- Moves up to `count` tasks from the head of pending to the tail of processing and writes their
-- leases in the same script, so there is no moment in which a task sits in processing without a
-- lease (the janitor would requeue it) or is leased without being in processing. Each task gets
-- a token of its own, from one INCRBY of the fence counter: every grant gets a token higher than
-- every earlier grant (as long as Redis keeps its data; see Queue::FloorFenceCounter and
-- fence_lib.lua), the tasks of one claim in pending's order. All of them are checked by the one
-- check_claim before (fence_lib.lua: one INFO per script). Appends {task, token, expires_ms} per
-- task (pending's order) to `out` and returns it; nothing when pending is empty. Call check_claim
-- first; `record` is its second value.
local function apply_claim(pending, processing, leases, fence, dataset, record, worker, ttl, count,
                           out)
  if count == 1 then  -- what a worker sends between two tasks: one command fewer, no tables
    local task = redis.call('LMOVE', pending, processing, 'LEFT', 'RIGHT')
    if not task then return out end
    local token = grant_token(fence, dataset, record)
    local expires = now_ms() + ttl
    redis.call('HSET', leases, task,
               cjson.encode({worker = worker, token = token, expires_ms = expires}))
    out[#out + 1] = task
    out[#out + 1] = token
    out[#out + 1] = expires
    return out
  end
  -- Read, push, then trim: RPUSH is the first write, so a processing list that cannot take the
  -- tasks (a wrong type) fails before pending lost them, as LMOVE above does (an LPOP first would
  -- drop them: popped, never pushed, and Push skips them while they stay in the queued set).
  local tasks = redis.call('LRANGE', pending, 0, count - 1)
  if #tasks == 0 then return out end
  redis.call('RPUSH', processing, unpack(tasks))
  redis.call('LTRIM', pending, #tasks, -1)
  local first = grant_tokens(fence, dataset, record, #tasks)
  local expires = now_ms() + ttl
  local fields = {}
  for i, task in ipairs(tasks) do
    local token = first + i - 1
    fields[2 * i - 1] = task
    fields[2 * i] = cjson.encode({worker = worker, token = token, expires_ms = expires})
    out[#out + 1] = task
    out[#out + 1] = token
    out[#out + 1] = expires
  end
  redis.call('HSET', leases, unpack(fields))
  return out
end

-- Unlike the other checks, returns two values: the task's from block (a string, the completed
-- set's score) and nil; or nil and an error reply for a malformed task.
local function check_task(script, task)
  local from_s = string.match(task or '', '^(%d+)%-%d+$')
  if not from_s then
    return nil, redis.error_reply(script .. ': malformed task ' .. tostring(task))
  end
  return from_s, nil
end

-- Ownership: (worker, token) must be the task's current lease. nil when it is; {0, reason} when
-- refused (no lease: the janitor requeued the task or it was completed; or another grant);
-- an error reply for a corrupt lease.
local function check_owner(script, leases, task, worker, token)
  local raw = redis.call('HGET', leases, task)
  if not raw then return {0, 'no lease for ' .. task} end
  local ok, lease = pcall(cjson.decode, raw)
  if not ok or type(lease) ~= 'table' then
    return redis.error_reply(script .. ': corrupt lease for ' .. task .. ': ' .. raw)
  end
  -- mutation: lease-owner
  -- (core/mutation.h: GAPLESS_MUTATION=lease-owner drops the lines up to the end marker, so
  -- anyone may complete a task whose lease exists; queue_renew.lua and queue_fail.lua too.)
  if lease.worker ~= worker or lease.token ~= token then
    return {0, task .. ' is leased to ' .. tostring(lease.worker) .. ' with token ' ..
               tostring(lease.token)}
  end
  -- end mutation: lease-owner
  return nil
end

-- Finishes an owned task (call check_owner first): out of processing, the queued set, the
-- attempts and expiries hashes, lease deleted, range recorded in the frontier's completed set
-- (score = from block, member "from-to").
local function apply_complete(processing, leases, queued, attempts, expiries, completed, task,
                              from_s)
  redis.call('LREM', processing, 1, task)
  redis.call('HDEL', leases, task)
  redis.call('SREM', queued, task)
  redis.call('HDEL', attempts, task)
  redis.call('HDEL', expiries, task)
  redis.call('ZADD', completed, from_s, task)
end

-- ---- end of queue_lib.lua; the script's own body follows ----

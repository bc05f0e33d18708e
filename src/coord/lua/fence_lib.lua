-- fence_lib.lua: which data set the fencing-token counter is valid on, checked by every script
-- that grants a token (queue_claim.lua, queue_complete_claim.lua, range_lock.lua) and recorded by
-- queue_fence_floor.lua. Not a script of its own: those scripts name it on a "-- needs:" line (see
-- queue_lib.lua). It only defines local functions and reads no KEYS or ARGV.
--
-- Why: a failover to a replica that lagged brings a counter behind tokens the old primary granted
-- and no process committed yet, so PostgreSQL cannot tell; INCR would grant them again (two
-- holders of one token). A Redis server's replication id (INFO replication master_replid) changes
-- with every promotion and restart, so the counter's key Keys::fence_dataset holds the id of the
-- server on which the counter was last floored from PostgreSQL (node/reconcile.h), and a grant on
-- a server with another id is refused with the error code DATASET, before any write: the caller
-- floors the counter again (above every token granted anywhere before) and claims again.
-- Where INFO is refused (an ACL, a proxy that hides it) no id is known and nothing is refused.

-- Cost: INFO is the dearest command of a grant (~3 us of Redis CPU, next to ~22 us for a whole
-- complete-and-claim), so it runs once per script, not once per grant: a script that grants several tokens
-- (a batch claim, queue_claim.lua) checks once for all of them, which is as safe as a check per
-- grant because nothing runs on the server between the check and the script's last write.

-- The server's replication id, '' when INFO is refused. A plain find, not a pattern: the id is
-- the 40 hex digits after the field's name.
local function server_replid()
  local ok, info = pcall(redis.call, 'INFO', 'replication')
  if not ok or type(info) ~= 'string' then return '' end
  local at = string.find(info, 'master_replid:', 1, true)
  if not at then return '' end
  local id = string.sub(info, at + 14, at + 53)
  if not string.match(id, '^%x+$') or #id ~= 40 then return '' end
  return id
end

-- Whether a token may be granted from `fence` here. Returns nil and the id to record with the
-- grant (false when none is to be recorded) when it may; the DATASET error reply when it may
-- not: the counter was floored on another data set, or it is gone while its record stayed (a
-- deleted key). A data set with neither a counter nor a record (a fresh one) may grant, and its
-- first grant records it (node/reconcile.h EnsureFenceFloor floors a missing counter before
-- every claim, so only a loss between that check and the claim grants from 0).
-- `counter_present`: whether the counter exists, when the caller has read it already (nil: read
-- it here).
local function check_fence_dataset(script, fence, dataset, counter_present)
  local replid = server_replid()
  if replid == '' then return nil, false end
  local recorded = redis.call('GET', dataset)
  local counter = counter_present
  if counter == nil then counter = redis.call('EXISTS', fence) == 1 end
  if recorded == replid and counter then return nil, false end
  if not recorded and not counter then return nil, replid end
  return redis.error_reply('DATASET ' .. script .. ': the fence counter (' ..
                           (counter and 'present' or 'missing') .. ') was floored on Redis ' ..
                           'data set ' .. tostring(recorded or 'none') .. ', this server is ' ..
                           replid .. ' (a failover, a restart): it must be floored again')
end

-- Takes n tokens (n >= 1) with one INCRBY of the counter, recording the data set when
-- check_fence_dataset said to; returns the first: the tokens are first .. first + n - 1, each
-- above every earlier grant.
local function grant_tokens(fence, dataset, record, n)
  local last = redis.call('INCRBY', fence, n)
  if record then redis.call('SET', dataset, record) end
  return last - n + 1
end

-- One token: INCR of the counter (grant_tokens for one).
local function grant_token(fence, dataset, record)
  local token = redis.call('INCR', fence)
  if record then redis.call('SET', dataset, record) end
  return token
end

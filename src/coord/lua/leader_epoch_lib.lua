-- leader_epoch_lib.lua: the epoch fence of the leader-only scripts on the coordination Redis
-- (queue_push.lua, queue_janitor.lua, frontier_advance.lua), written once. Not a script of its
-- own: those scripts name it on a "-- needs:" line and LoadScript prepends it. Local functions
-- only; it reads no KEYS or ARGV by itself.
--
-- The leader passes its epoch (persisted on a quorum of lock nodes before first use, so epochs
-- used here increase from leader to leader: coord/election.h). The key remembers the highest epoch
-- seen; a call with a lower one comes from a deposed leader (paused, partitioned) and is refused
-- before any write. Epoch 0 means "not a leader-only caller" (operator commands such as
-- `gapless reconcile`, tests): not fenced, and recorded as nothing.

-- nil when `arg` may act, else the reply to return: an error whose first word is
-- STALE_LEADER_EPOCH (callers decide on that code, queue.h kStaleLeaderEpochError).
local function check_leader_epoch(script, key, arg)
  local epoch = tonumber(arg)
  if not epoch or epoch < 0 or epoch ~= math.floor(epoch) then
    return redis.error_reply(script .. ': bad leader epoch ' .. tostring(arg))
  end
  if epoch == 0 then return nil end
  local stored = tonumber(redis.call('GET', key) or '0')
  if not stored then return redis.error_reply(script .. ': ' .. key .. ' is not a number') end
  if epoch < stored then
    return redis.error_reply('STALE_LEADER_EPOCH ' .. script .. ': leader epoch ' .. arg ..
                             ' is below ' .. stored .. ', a newer leader was elected')
  end
  return nil
end

-- Records `arg` as the highest epoch seen (a write: call it after every check).
local function record_leader_epoch(key, arg)
  local epoch = tonumber(arg)
  if epoch > 0 and epoch > tonumber(redis.call('GET', key) or '0') then
    redis.call('SET', key, arg)
  end
end

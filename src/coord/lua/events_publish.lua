-- events_publish: appends a batch of events to their streams in one round trip
-- (events/redis_bus.cc, the Redis Streams publisher).
--
-- KEYS[i]  the stream of event i: its topic, "{event_type}.{chain_id}"
-- ARGV[1]  approximate maximum length of every stream (XADD MAXLEN ~); "0" = no trim
-- ARGV[1 + 3(i-1) + 1 .. + 3]  event i's event_type, event_id, body (the envelope JSON)
--
-- Returns the number of entries added. The events are appended in KEYS order, so within a stream
-- they keep the batch's order. There is nothing to check before the writes: a batch sent twice
-- (its reply was lost) is appended twice, with the same event ids (at-least-once).
local max_len = tonumber(ARGV[1])
if max_len == nil then
  return redis.error_reply('ERR events_publish: ARGV[1] (max length) is not a number')
end
if #ARGV ~= 1 + 3 * #KEYS then
  return redis.error_reply('ERR events_publish: expected 3 arguments per key')
end
for i, stream in ipairs(KEYS) do
  local base = 1 + 3 * (i - 1)
  if max_len > 0 then
    redis.call('XADD', stream, 'MAXLEN', '~', max_len, '*', 'event_type', ARGV[base + 1],
      'event_id', ARGV[base + 2], 'body', ARGV[base + 3])
  else
    redis.call('XADD', stream, '*', 'event_type', ARGV[base + 1], 'event_id', ARGV[base + 2],
      'body', ARGV[base + 3])
  end
end
return #KEYS

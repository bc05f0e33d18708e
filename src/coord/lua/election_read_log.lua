-- election_read_log.lua: the next entries of one lock node's head log after a reader's cursor,
-- with the log's incarnation, read atomically so a reader can tell "nothing new" from "this node
-- lost its data and started a new log" (a new incarnation: re-read it from the start). Read-only.
--
-- KEYS[1]  the log stream          Keys::head_log
-- KEYS[2]  the log incarnation     Keys::head_incarnation
-- KEYS[3]  the fork                Keys::head_fork ("generation:point"; absent: "0:-1")
-- ARGV[1]  the cursor: the last stream id read, or '-' for the start
-- ARGV[2]  the most entries to return (integer > 0)
-- Returns  {incarnation or '', entries, fork}: entries as XRANGE returns them, each
--          {id, {'height', h, 'hash', x, 'parent', p, 'epoch', e}}

local cursor, count = ARGV[1], tonumber(ARGV[2])
if not count or count <= 0 then return redis.error_reply('election_read_log: bad count') end
local start = '-'
if cursor ~= '-' then start = '(' .. cursor end
local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', count)
return {redis.call('GET', KEYS[2]) or '', entries, redis.call('GET', KEYS[3]) or '0:-1'}

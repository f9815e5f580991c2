-- Puts a delivered or failed delivery back into its content's queue (POST .../redeliver), with a
-- fresh age: it is attempted again, and retried like a new one. Its body is made from the event
-- stream when it is attempted: a delivery whose stream entry is gone (the change feed's
-- retention) cannot be made again.
-- KEYS[1] wh:{p}:due  KEYS[2] wh:{p}:pending  KEYS[3] events:{p}
-- ARGV[1] key prefix  ARGV[2] webhook  ARGV[3] position  ARGV[4] now ms  ARGV[5] record ttl ms
-- ARGV[6] the event's stream entry id
-- Returns 0 when there is no such delivery, -1 when its event is no longer in the stream, 1 when
-- queued (or already pending).
local prefix, wid, pos = ARGV[1], ARGV[2], ARGV[3]
local dkey = prefix .. 'd:' .. wid .. ':' .. pos
local rec = redis.call('HMGET', dkey, 'status', 'cid')
if not rec[1] then return 0 end
if rec[1] == 'pending' then return 1 end
if #redis.call('XRANGE', KEYS[3], ARGV[6], ARGV[6]) == 0 then return -1 end
redis.call('ZREM', prefix .. 'log:' .. wid .. ':' .. rec[1], pos)
redis.call('HSET', dkey, 'status', 'pending', 'created', ARGV[4], 'next', ARGV[4])
redis.call('HDEL', dkey, 'claim')
redis.call('PEXPIRE', dkey, ARGV[5])
redis.call('ZADD', prefix .. 'log:' .. wid .. ':pending', ARGV[4], pos)
redis.call('ZADD', KEYS[2], ARGV[4], wid .. ':' .. pos)
local member = wid .. '|' .. rec[2]
redis.call('ZADD', prefix .. 'q:' .. member, 0, pos)
redis.call('ZADD', KEYS[1], 'NX', ARGV[4], member)
return 1

-- Records the outcome of one delivery attempt, if the caller's claim still holds.
-- KEYS[1] wh:{p}:due  KEYS[2] wh:{p}:pending
-- ARGV[1] key prefix  ARGV[2] queue member  ARGV[3] position  ARGV[4] claim token
-- ARGV[5] outcome: retry | delivered | failed  ARGV[6] now ms  ARGV[7] next attempt ms (retry)
-- ARGV[8] last HTTP status ('' for none)  ARGV[9] last error ('' for none)  ARGV[10] log retention ms
-- On retry the queue waits until the next attempt (later deliveries of the content wait behind
-- it); otherwise the delivery leaves its queue and the next one of the content is due at once.
-- Returns 1, or 0 when another process claimed the delivery since (its outcome counts, not this).
local prefix, member, pos = ARGV[1], ARGV[2], ARGV[3]
local wid = string.match(member, '^([^|]*)|')
local dkey = prefix .. 'd:' .. wid .. ':' .. pos
if redis.call('HGET', dkey, 'claim') ~= ARGV[4] then return 0 end
redis.call('HINCRBY', dkey, 'attempts', 1)
redis.call('HSET', dkey, 'lastStatus', ARGV[8], 'lastError', ARGV[9], 'time', ARGV[6])
redis.call('HDEL', dkey, 'claim')
local outcome = ARGV[5]
if outcome == 'retry' then
  redis.call('HSET', dkey, 'next', ARGV[7])
  redis.call('ZADD', KEYS[1], ARGV[7], member)
  return 1
end
local now = tonumber(ARGV[6])
local retention = tonumber(ARGV[10])
redis.call('HSET', dkey, 'status', outcome, 'next', '')
redis.call('PEXPIRE', dkey, retention)
redis.call('ZREM', prefix .. 'log:' .. wid .. ':pending', pos)
local log = prefix .. 'log:' .. wid .. ':' .. outcome
redis.call('ZADD', log, now, pos)
redis.call('ZREMRANGEBYSCORE', log, '-inf', now - retention)
redis.call('ZREM', KEYS[2], wid .. ':' .. pos)
local q = prefix .. 'q:' .. member
redis.call('ZREM', q, pos)
if redis.call('ZRANGE', q, 0, 0)[1] then
  redis.call('ZADD', KEYS[1], now, member)
else
  redis.call('ZREM', KEYS[1], member)
end
return 1

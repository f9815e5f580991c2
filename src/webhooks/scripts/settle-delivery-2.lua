-- Records the outcome of one delivery attempt, if the caller's claim still holds.
-- KEYS[1] wh:{p}:due  KEYS[2] wh:{p}:pending
-- ARGV[1] key prefix  ARGV[2] queue member  ARGV[3] position  ARGV[4] claim token
-- ARGV[5] outcome: retry | delivered | failed | dropped (its webhook was removed: the record goes)
-- ARGV[6] now ms  ARGV[7] next attempt ms (retry)
-- ARGV[8] last HTTP status ('' for none)  ARGV[9] last error ('' for none)  ARGV[10] log retention ms
-- ARGV[11] claimed until ms (for the next delivery of the queue)
-- On retry the queue waits until the next attempt (later deliveries of the content wait behind
-- it); otherwise the delivery leaves its queue and the caller goes on with the queue's next
-- delivery at once, under the same claim (one script call per delivery, no wait for a poll).
-- Returns {1} (or {1, position, event id, attempts, created} of the next delivery now claimed),
-- or {0} when another process claimed the delivery since (its outcome counts, not this).
local prefix, member, pos = ARGV[1], ARGV[2], ARGV[3]
local wid = string.match(member, '^([^|]*)|')
local dkey = prefix .. 'd:' .. wid .. ':' .. pos
if redis.call('HGET', dkey, 'claim') ~= ARGV[4] then return { 0 } end
local outcome = ARGV[5]
local now = tonumber(ARGV[6])
if outcome == 'dropped' then
  redis.call('DEL', dkey)
  redis.call('ZREM', prefix .. 'log:' .. wid .. ':pending', pos)
else
  redis.call('HINCRBY', dkey, 'attempts', 1)
  redis.call('HSET', dkey, 'lastStatus', ARGV[8], 'lastError', ARGV[9], 'time', ARGV[6])
  redis.call('HDEL', dkey, 'claim')
  if outcome == 'retry' then
    redis.call('HSET', dkey, 'next', ARGV[7])
    redis.call('ZADD', KEYS[1], ARGV[7], member)
    return { 1 }
  end
  local retention = tonumber(ARGV[10])
  redis.call('HSET', dkey, 'status', outcome, 'next', '')
  -- A record written before records held no body: the body goes once it is delivered or failed.
  redis.call('HDEL', dkey, 'body')
  redis.call('PEXPIRE', dkey, retention)
  redis.call('ZREM', prefix .. 'log:' .. wid .. ':pending', pos)
  local log = prefix .. 'log:' .. wid .. ':' .. outcome
  redis.call('ZADD', log, now, pos)
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - retention)
end
redis.call('ZREM', KEYS[2], wid .. ':' .. pos)
local q = prefix .. 'q:' .. member
redis.call('ZREM', q, pos)
while true do
  local head = redis.call('ZRANGE', q, 0, 0)[1]
  if not head then
    redis.call('ZREM', KEYS[1], member)
    return { 1 }
  end
  local nkey = prefix .. 'd:' .. wid .. ':' .. head
  local rec = redis.call('HMGET', nkey, 'eventId', 'attempts', 'created', 'next')
  if not rec[1] then
    redis.call('ZREM', q, head) -- expired: nothing left to deliver
  elseif (tonumber(rec[4]) or 0) > now then
    -- put back by a redelivery with a later time: due then
    redis.call('ZADD', KEYS[1], rec[4], member)
    return { 1 }
  else
    redis.call('ZADD', KEYS[1], ARGV[11], member)
    redis.call('HSET', nkey, 'claim', ARGV[4])
    return { 1, head, rec[1], rec[2], rec[3] }
  end
end

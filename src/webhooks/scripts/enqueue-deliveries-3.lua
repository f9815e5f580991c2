-- Turns feed events of one partition into deliveries (the fan-out), fenced by the fan-out lease.
-- KEYS[1] wh:{p}:lock  KEYS[2] wh:{p}:due  KEYS[3] wh:{p}:pending
-- ARGV[1] lease token  ARGV[2] key prefix wh:{p}:  ARGV[3] record ttl ms
-- then per delivery: webhook, content, position, event id, created ms.
-- A record holds no body: the body is made from the event stream at each attempt (the event's
-- position names its stream entry), so what Redis keeps per delivery does not grow with the
-- event's size.
-- A delivery that exists already (the event was fanned out before a crash) is left as it is, so a
-- replay adds nothing. A queue's head becomes due now unless the queue is already scheduled (its
-- head is being retried: the new delivery waits behind it).
-- Returns the number added, or -1 when the caller no longer holds the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local prefix = ARGV[2]
local ttl = ARGV[3]
local added = 0
for i = 4, #ARGV, 5 do
  local wid, cid, pos, eid, created = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local dkey = prefix .. 'd:' .. wid .. ':' .. pos
  if redis.call('EXISTS', dkey) == 0 then
    redis.call('HSET', dkey, 'wid', wid, 'cid', cid, 'pos', pos, 'eventId', eid, 'status', 'pending', 'attempts', 0, 'created', created, 'next', created)
    redis.call('PEXPIRE', dkey, ttl)
    local member = wid .. '|' .. cid
    redis.call('ZADD', prefix .. 'q:' .. member, 0, pos)
    redis.call('ZADD', prefix .. 'log:' .. wid .. ':pending', created, pos)
    redis.call('ZADD', KEYS[3], created, wid .. ':' .. pos)
    redis.call('ZADD', KEYS[2], 'NX', created, member)
    added = added + 1
  end
end
return added

-- Claims due delivery queues of one partition for one attempt each: the head of each queue.
-- KEYS[1] wh:{p}:due
-- ARGV[1] key prefix  ARGV[2] now ms  ARGV[3] claimed until ms  ARGV[4] at most  ARGV[5] claim token
-- ARGV[6...] webhooks not to claim for (the caller has as many of their deliveries in flight as
-- one webhook may have: a receiver that hangs must not take every slot of the process)
-- A claimed queue is pushed to ARGV[3]: when its claimer dies, it is due again then (at least once).
-- Returns per claimed queue: member, position, event id, attempts, created (the caller makes the
-- body from the event stream).
local prefix = ARGV[1]
local out = {}
local max = tonumber(ARGV[4])
local skip = {}
for i = 6, #ARGV do skip[ARGV[i]] = true end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, max * 4)
for _, member in ipairs(due) do
  if #out >= max then break end
  local q = prefix .. 'q:' .. member
  local wid = string.match(member, '^([^|]*)|')
  local claimed = skip[wid] == true
  while not claimed do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then
      redis.call('ZREM', KEYS[1], member)
      break
    end
    local dkey = prefix .. 'd:' .. wid .. ':' .. head
    local rec = redis.call('HMGET', dkey, 'eventId', 'attempts', 'created')
    if rec[1] then
      redis.call('ZADD', KEYS[1], ARGV[3], member)
      redis.call('HSET', dkey, 'claim', ARGV[5])
      out[#out + 1] = { member, head, rec[1], rec[2], rec[3] }
      claimed = true
    else
      -- the record expired (kept longer than any retry): nothing left to deliver
      redis.call('ZREM', q, head)
    end
  end
end
return out

-- Fires one time-state boundary of the change feed once: appends its event and takes the
-- boundary off the schedule (and off its content's list of scheduled boundaries) in one step, so
-- two schedule owners can never fire it twice. The content's place in the fair queue moves to its
-- next boundary's time, but not before ARGV[6] (the owner's tick): a content with more boundaries
-- due than it was given a turn for waits behind those due that had none. Every key shares the
-- partition hash tag, so this is valid on Redis Cluster.
--
-- KEYS[1] changes:ts:{p}        the partition's schedule: boundary member -> its time (ms)
-- KEYS[2] changes:ts-fired:{p}  boundaries fired (kept so that a replayed event cannot schedule one again)
-- KEYS[3] ct:{p}:<cid>          head of the content (its revision is checked)
-- KEYS[4] events:{p}            the partition's event stream
-- KEYS[5] changes:ts-by:{p}     content id -> its scheduled boundaries (schedule-timestate-5.lua)
-- KEYS[6] changes:ts-next:{p}   content id -> when its next boundary is to fire (the fair queue)
-- ARGV[1] member  ARGV[2] head revision the event was made from  ARGV[3] event blob ('' drops a
-- boundary that no longer holds, without an event)  ARGV[4] events maxlen  ARGV[5] content id
-- ARGV[6] the tick's time (ms)
-- Returns 1 fired (or dropped), 0 not on the schedule any more, -1 the head moved (decide again).
-- A member the content's list names but the schedule no longer holds (taken off by a process
-- of an earlier build, which kept no lists) leaves the list too, and 0 is returned: otherwise the
-- content kept a place in the fair queue that no firing would ever move (review s24).
local function unlist()
  local raw = redis.call('HGET', KEYS[5], ARGV[5])
  if not raw then return end
  local by = cjson.decode(raw)
  local rest = {}
  for _, m in ipairs(by.m) do
    if m ~= ARGV[1] then rest[#rest + 1] = m end
  end
  -- Not the list's (a boundary of an earlier build that the content's list never named): as it was.
  if #rest == #by.m then return end
  if #rest > 0 then
    by.m = rest
    redis.call('HSET', KEYS[5], ARGV[5], cjson.encode(by))
    local first = tonumber(ARGV[6])
    local soonest
    for _, m in ipairs(rest) do
      local t = tonumber(redis.call('ZSCORE', KEYS[1], m))
      if t and (not soonest or t < soonest) then soonest = t end
    end
    if soonest and soonest > first then first = soonest end
    redis.call('ZADD', KEYS[6], first, ARGV[5])
  else
    redis.call('HDEL', KEYS[5], ARGV[5])
    redis.call('ZREM', KEYS[6], ARGV[5])
  end
end
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not at then
  unlist()
  return 0
end
if ARGV[3] ~= '' then
  if redis.call('HGET', KEYS[3], 'rev') ~= ARGV[2] then return -1 end
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], '*', 'e', ARGV[3])
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], at, ARGV[1])
unlist()
return 1

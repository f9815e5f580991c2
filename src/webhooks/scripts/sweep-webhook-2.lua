-- Removes up to ARGV[3] delivery records of a removed webhook in one partition, with their
-- entries in its logs, the partition's pending set and the content queues (a queue left empty
-- leaves the due set). Every record of a webhook is in one of its three logs (pending, delivered,
-- failed), so the logs are the index: no scan.
-- KEYS[1] wh:{p}:due  KEYS[2] wh:{p}:pending
-- ARGV[1] key prefix  ARGV[2] webhook  ARGV[3] at most this many records
-- Returns 1 when there may be more, 0 when the webhook has nothing left in the partition.
local prefix, wid, max = ARGV[1], ARGV[2], tonumber(ARGV[3])
local done = 0
for _, status in ipairs({ 'pending', 'delivered', 'failed' }) do
  local log = prefix .. 'log:' .. wid .. ':' .. status
  local positions = redis.call('ZRANGE', log, 0, max - done - 1)
  for _, pos in ipairs(positions) do
    local dkey = prefix .. 'd:' .. wid .. ':' .. pos
    local cid = redis.call('HGET', dkey, 'cid')
    if cid then
      local member = wid .. '|' .. cid
      local q = prefix .. 'q:' .. member
      redis.call('ZREM', q, pos)
      if redis.call('EXISTS', q) == 0 then redis.call('ZREM', KEYS[1], member) end
      redis.call('DEL', dkey)
    end
    redis.call('ZREM', KEYS[2], wid .. ':' .. pos)
    redis.call('ZREM', log, pos)
  end
  done = done + #positions
  if done >= max then return 1 end
end
return 0

-- The sweep's second step (src/security/unclaimed-files.ts): up to ARGV[3] files of KEYS[1]
-- (unclaimed:{p}:aside) set aside at or before ARGV[1] (no write claimed them in the grace) are
-- taken: they leave it and count no more for their uploader (KEYS[2] unclaimed:{p}:by, KEYS[3]
-- unclaimed:{p}:count), and enter KEYS[4] (unclaimed:{p}:taken, scored ARGV[2], now: a write
-- claiming one is refused) and KEYS[5] (unclaimed:{p}:deleting: the sweep deletes them, and a
-- key leaves it only once its file is gone). A write's claim (unclaimed-drop-6.lua) and this are
-- each one atomic step, so a file is either claimed or taken, never both. Answers how many were
-- taken. The keys share the partition's hash tag.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  local uploader = redis.call('HGET', KEYS[2], m)
  redis.call('HDEL', KEYS[2], m)
  if uploader and redis.call('HINCRBY', KEYS[3], uploader, -1) <= 0 then
    redis.call('HDEL', KEYS[3], uploader)
  end
  redis.call('ZADD', KEYS[4], ARGV[2], m)
  redis.call('ZADD', KEYS[5], ARGV[2], m)
end
return #due

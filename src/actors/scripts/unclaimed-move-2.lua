-- The sweep's first step (src/security/unclaimed-files.ts): up to ARGV[3] marks of KEYS[1]
-- (unclaimed:{p}) made at or before ARGV[1] (the TTL ago) leave it for KEYS[2]
-- (unclaimed:{p}:aside), scored ARGV[2] (now); they still count for their uploader. A write's
-- claim removes a file from either set; only a file still aside a grace later is taken
-- (unclaimed-take-5.lua). Answers how many moved. The keys share the partition's hash tag.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(due) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('ZADD', KEYS[2], ARGV[2], m)
end
return #due

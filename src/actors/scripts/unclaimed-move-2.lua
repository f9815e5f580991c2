-- A step of the sweep of unclaimed files (src/security/unclaimed-files.ts): up to ARGV[3] members
-- of the sorted set KEYS[1] scored at or before ARGV[1] leave it for KEYS[2], scored ARGV[2] (now),
-- and are answered. The sweep moves marks (unclaimed:{p}) aside (unclaimed:{p}:aside) once they
-- are older than the TTL, and files still aside a grace later into unclaimed:{p}:taken, to delete
-- them. A write's claim (unclaimed-claim-3.lua) removes a file from the first two sets and is
-- refused for one in the third; each is one atomic step, so a file is either claimed or taken,
-- never both. The keys share the partition's hash tag.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, member in ipairs(due) do
  redis.call('ZREM', KEYS[1], member)
  redis.call('ZADD', KEYS[2], ARGV[2], member)
end
return due

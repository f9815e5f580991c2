-- Drops the marks of the storage keys ARGV[1..] (src/security/unclaimed-files.ts): a write's claim
-- of the files it maps, or the delete of a file. KEYS[1] unclaimed:{p} (marks), KEYS[2]
-- unclaimed:{p}:aside, KEYS[3] unclaimed:{p}:by, KEYS[4] unclaimed:{p}:count, KEYS[5]
-- unclaimed:{p}:taken, KEYS[6] unclaimed:{p}:deleting. A dropped mark no longer counts for its
-- uploader. Answers the keys the sweep has taken to delete (being deleted, or deleted within a
-- day): a write must not map them. The keys share the partition's hash tag.
local taken = {}
for i = 1, #ARGV do
  local m = ARGV[i]
  local dropped = redis.call('ZREM', KEYS[1], m) + redis.call('ZREM', KEYS[2], m)
  if dropped > 0 then
    local uploader = redis.call('HGET', KEYS[3], m)
    redis.call('HDEL', KEYS[3], m)
    if uploader and redis.call('HINCRBY', KEYS[4], uploader, -1) <= 0 then
      redis.call('HDEL', KEYS[4], uploader)
    end
  end
  if redis.call('ZSCORE', KEYS[5], m) or redis.call('ZSCORE', KEYS[6], m) then
    taken[#taken + 1] = m
  end
end
return taken

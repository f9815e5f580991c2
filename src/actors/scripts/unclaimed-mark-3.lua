-- Marks a file uploaded to a content host no live content holds (src/security/unclaimed-files.ts):
-- KEYS[1] unclaimed:{p} (storage key -> upload time), KEYS[2] unclaimed:{p}:by (storage key ->
-- uploader), KEYS[3] unclaimed:{p}:count (uploader -> marks of theirs not yet claimed, dropped or
-- taken); ARGV: the storage key, the upload time, the uploader, and how many marks an uploader
-- may have here. Answers 1 when marked, 0 when the uploader has that many already (nothing
-- written). The keys share the partition's hash tag.
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
local n = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0')
if n >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
return 1

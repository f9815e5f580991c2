-- A write's claim of the content files it maps (src/security/unclaimed-files.ts): the storage keys
-- ARGV[1..] leave KEYS[1] (unclaimed:{p}, the marks) and KEYS[2] (unclaimed:{p}:aside). Answers
-- those that are in KEYS[3] (unclaimed:{p}:taken): the sweep took them to delete, and the write
-- must not map them. The three keys share the partition's hash tag.
local taken = {}
for i = 1, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
  if redis.call('ZSCORE', KEYS[3], ARGV[i]) then
    taken[#taken + 1] = ARGV[i]
  end
end
return taken

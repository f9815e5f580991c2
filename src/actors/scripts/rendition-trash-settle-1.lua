-- After a sweep of one source's rendition trash (src/gateway/renditions.ts): the source leaves the
-- set of sources with trash (its trash was empty), or waits there until its next eviction is due;
-- unless its score changed since the sweep read it (a render registered it again meanwhile, and
-- may have evicted more: then it stays as the render left it). Returns 1 when changed, else 0.
-- KEYS[1] rendition-trash-sources (source tag -> when its trash is next due, ms)
-- ARGV[1] source tag  ARGV[2] the score the sweep read  ARGV[3] when next due (ms), '' when its trash is empty
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if (not cur) or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1

-- A source file is being deleted (src/gateway/renditions.ts, `condemnRenditions`): every kept
-- rendition of it moves from the index to the trash, whose files are removed once their grace is
-- over, and the index keeps only the mark `!gone` (when, ms) for ARGV[2] ms, so that a render of
-- the source still in flight puts its file in the trash too instead of naming it
-- (rendition-keep-3.lua). Returns how many renditions it moved. One source's keys share its hash
-- tag (one Cluster slot).
-- KEYS[1] rendition:{s}  KEYS[2] rendition-lru:{s}  KEYS[3] rendition-trash:{s} (<id>/<path> -> evicted at, ms)
-- ARGV[1] now (ms)  ARGV[2] how long the mark stays (ms)
local all = redis.call('HGETALL', KEYS[1])
local moved = 0
for i = 1, #all, 2 do
  if all[i] ~= '!gone' then
    redis.call('ZADD', KEYS[3], ARGV[1], all[i] .. '/' .. all[i + 1])
    moved = moved + 1
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], '!gone', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return moved

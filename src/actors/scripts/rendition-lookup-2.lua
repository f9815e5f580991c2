-- The kept rendition of a source (src/gateway/renditions.ts): its stored path, nil when none,
-- and its use recorded for the per-source bound.
-- KEYS[1] rendition:{s} (rendition id -> stored path)  KEYS[2] rendition-lru:{s} (id -> last use, ms)
-- ARGV[1] rendition id  ARGV[2] now (ms). One source's keys share its hash tag (one Cluster slot).
local path = redis.call('HGET', KEYS[1], ARGV[1])
if path then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) end
return path

-- Names a rendered file as the kept rendition of a source (src/gateway/renditions.ts), unless
-- another file (not the stale one) is named already; records its use; then, past the bound
-- (RENDITION_MAX_PER_SOURCE), moves the least recently used other renditions of the source from
-- the index to the trash, whose files are removed once their grace is over. Returns the path the
-- index names. One source's keys share its hash tag (one Cluster slot). A source being deleted
-- (its index marked `!gone` by rendition-condemn-3.lua) names nothing: the file goes to the trash
-- and nil is returned.
-- KEYS[1] rendition:{s}  KEYS[2] rendition-lru:{s}  KEYS[3] rendition-trash:{s} (<id>/<path> -> evicted at, ms)
-- ARGV[1] rendition id  ARGV[2] own path  ARGV[3] stale path ('' for none)  ARGV[4] now (ms)  ARGV[5] bound
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], '!gone') == 1 then
  redis.call('ZADD', KEYS[3], ARGV[4], id .. '/' .. ARGV[2])
  return false
end
local cur = redis.call('HGET', KEYS[1], id)
if (not cur) or cur == ARGV[3] then
  redis.call('HSET', KEYS[1], id, ARGV[2])
  cur = ARGV[2]
end
redis.call('ZADD', KEYS[2], ARGV[4], id)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, over)) do
    if over > 0 and old ~= id then
      local path = redis.call('HGET', KEYS[1], old)
      redis.call('HDEL', KEYS[1], old)
      redis.call('ZREM', KEYS[2], old)
      if path then redis.call('ZADD', KEYS[3], ARGV[4], old .. '/' .. path) end
      over = over - 1
    end
  end
end
return cur

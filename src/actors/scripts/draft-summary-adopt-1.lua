-- Keeps the summary of a draft stored before summaries were kept (src/adapters/content-store.ts
-- `workspaceDrafts`), made by the reader from the draft it read: written only while that draft
-- is still there (its length unchanged) and no valid summary is (one written with a later draft
-- by commit-draft-4.lua wins).
-- KEYS[1] dr:{p}:<cid>  ARGV[1] the workspace (the draft's field)  ARGV[2] the summary's field
-- ARGV[3] the summary (MessagePack {type, size})  ARGV[4] the length of the draft it was made from
-- Returns 1 when written, 0 otherwise.
local len = redis.call('HSTRLEN', KEYS[1], ARGV[1])
if len == 0 or len ~= tonumber(ARGV[4]) then return 0 end
local cur = redis.call('HGET', KEYS[1], ARGV[2])
if cur then
  local ok, s = pcall(cmsgpack.unpack, cur)
  if ok and type(s) == 'table' and s.size == len then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return 1

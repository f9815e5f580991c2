-- How many entries of a content's history list are of revisions up to ARGV[1]: the reader then
-- reads only those (ContentStore.historyList in src/adapters/content-store.ts). Each revision's
-- history and metadata is read on its own, so a reader walking revisions 1, 2, 3, ... of a long
-- list took the whole list each time before: 1.6 MB from Redis for a history of 4 KB.
-- KEYS[1] vi:{p}:<cid> or vh:{p}:<cid>   the list: packed entries, each with its `rev`, appended by
--                                        the commits in revision order (commit-content-n.lua) and
--                                        taken off its start by the archiver (archive-move-8.lua)
-- ARGV[1] the revision
-- The first entry past the revision is found by halving (LINDEX, one entry decoded a step; the
-- last entry first, so a read at the head's revision decodes one). An entry cmsgpack cannot read
-- makes the answer the list's length (the reader keeps the entries up to the revision).
-- (Read-only.)
local upTo = tonumber(ARGV[1])
local function revAt(i)
  local ok, e = pcall(cmsgpack.unpack, redis.call('LINDEX', KEYS[1], i))
  if ok and type(e) == 'table' and type(e.rev) == 'number' then return e.rev end
  return nil
end
local n = redis.call('LLEN', KEYS[1])
local last = n > 0 and revAt(n - 1)
if not last or last <= upTo then return n end
local lo, hi = 0, n - 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local rev = revAt(mid)
  if rev == nil then return n end
  if rev <= upTo then lo = mid + 1 else hi = mid end
end
return lo

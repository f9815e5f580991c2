-- Removes from Redis the history that the archiver has copied to the version archive and
-- verified there, and records where it went (issue 25; src/actors/archiver.ts). All or nothing.
-- Every key shares the partition hash tag, so this is valid on Redis Cluster.
--
-- KEYS[1] arc:{p}:lease      the archiver's lease of the partition; the move is fenced by its owner
-- KEYS[2] ct:{p}:<cid>       head of the content: the move was planned at revision headRev
-- KEYS[3] rv:{p}:<cid>       revision snapshots: the archived revisions leave
-- KEYS[4] vr:{p}:<cid>       versions: the archived versions leave
-- KEYS[5] vi:{p}:<cid>       version index: its oldest indexEntries entries leave
-- KEYS[6] vh:{p}:<cid>       view history: its oldest viewEntries entries leave
-- KEYS[7] ar:{p}:<cid>       archive index (a string of packed entries): the segment's entry is appended
-- KEYS[8] arc:{p}:stats      counters (versions, revisions, segments, bytes, backlog)
-- ARGV[1] one MessagePack map (packScriptArgs): owner, headRev, indexLength (the index the move was
--         planned on), indexKeep (bytes of it that stay: less when the move folds the last segments
--         into its own), entry, folded (segments folded), revisions, versions, indexEntries,
--         viewEntries, bytes.
-- Returns 1 moved, -1 lease lost, -2 the content changed since the plan (a new revision: a
-- version may have been put on a view), -3 the index is not the one the move was planned on
-- (another move recorded a segment since); nothing changes then.
local a = cmsgpack.unpack(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.owner then return -1 end
if tonumber(redis.call('HGET', KEYS[2], 'rev') or '0') ~= a.headRev then return -2 end
if redis.call('STRLEN', KEYS[7]) ~= a.indexLength then return -3 end
if a.indexKeep == a.indexLength then
  redis.call('APPEND', KEYS[7], a.entry)
elseif a.indexKeep == 0 then
  redis.call('SET', KEYS[7], a.entry)
else
  -- a compaction: the entries after indexKeep are folded into this one
  redis.call('SET', KEYS[7], redis.call('GETRANGE', KEYS[7], 0, a.indexKeep - 1) .. a.entry)
end
local function hdelAll(key, fields)
  for i = 1, #fields, 1000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 999, #fields)))
  end
end
hdelAll(KEYS[3], a.revisions)
hdelAll(KEYS[4], a.versions)
if a.indexEntries > 0 then redis.call('LTRIM', KEYS[5], a.indexEntries, -1) end
if a.viewEntries > 0 then redis.call('LTRIM', KEYS[6], a.viewEntries, -1) end
redis.call('HINCRBY', KEYS[8], 'versions', #a.versions)
redis.call('HINCRBY', KEYS[8], 'revisions', #a.revisions)
redis.call('HINCRBY', KEYS[8], 'segments', 1 - a.folded)
redis.call('HINCRBY', KEYS[8], 'bytes', a.bytes)
redis.call('HINCRBY', KEYS[8], 'backlog', -#a.versions)
return 1

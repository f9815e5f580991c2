-- Commits one change of one content, atomically, and appends its event.
-- Every key shares the partition hash tag, so this is valid on Redis Cluster.
--
-- KEYS[1] lease:{p}          the partition lease; the commit is fenced by its owner
-- KEYS[2] ct:{p}:<cid>       head of the content: rev, s (snapshot), h (its head version key)
-- KEYS[3] rv:{p}:<cid>       snapshot of every revision
-- KEYS[4] vr:{p}:<cid>       versions, by version key
-- KEYS[5] vi:{p}:<cid>       version index (history), one entry per version
-- KEYS[6] vh:{p}:<cid>       view history, one entry per view event
-- KEYS[7] events:{p}         the partition's content event stream
-- KEYS[8] done:{p}:<cmdId>   the command's recorded reply (idempotent replay)
-- KEYS[9] dr:{p}:<cid>       workspace drafts of the content (a promote removes one)
-- KEYS[10] cmd:{p}           the partition's command stream (the command is acknowledged)
-- KEYS[11] cat:{p}           catalog: content key -> time of its last change (re-indexing by time)
-- KEYS[12] cat:{p}:t:<type>  catalog: content keys of one type (re-indexing by type)
-- ARGV[1] the arguments, one MessagePack map (packScriptArgs in src/adapters/redis.ts);
-- a name left out is nil here:
--   owner                  the lease owner the commit expects
--   expectedRev            the head revision the change was made on (0: the content is new)
--   rev, snapshot, head    the new revision, its snapshot and its head version key (read with
--                          the snapshot by export-read-n.lua, which cannot decode the snapshot)
--   versionKey, version, versionIndexEntry   the new version (left out: the change makes none)
--   event, eventsMaxLen    the event appended to the partition's stream, and the stream's bound
--   reply, dedupTtl        the reply recorded for a replay, for dedupTtl seconds (left out: none)
--   ts                     time of this change (ms), for the catalog
--   group, entryId         the command's stream entry, acknowledged (left out: a local command)
--   promotedFrom, promotedSummary   the workspace whose draft the commit promotes, and the field
--                          of that draft's summary (commit-draft-4.lua); both removed (left out: none)
--   viewEvents             view history entries
-- Returns {1} committed, {-1} lease lost, {-2, rev} revision moved (CommitOutcome in src/adapters/content-store.ts).
local a = cmsgpack.unpack(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.owner then return {-1} end
local cur = tonumber(redis.call('HGET', KEYS[2], 'rev') or '0')
if cur ~= a.expectedRev then return {-2, cur} end
redis.call('HSET', KEYS[2], 'rev', a.rev, 's', a.snapshot, 'h', a.head)
redis.call('HSET', KEYS[3], a.rev, a.snapshot)
if a.versionKey then
  redis.call('HSET', KEYS[4], a.versionKey, a.version)
  redis.call('RPUSH', KEYS[5], a.versionIndexEntry)
end
if a.promotedFrom then redis.call('HDEL', KEYS[9], a.promotedFrom, a.promotedSummary) end
local cid = string.match(KEYS[2], ':([^:]+)$')
redis.call('ZADD', KEYS[11], a.ts, cid)
redis.call('SADD', KEYS[12], cid)
for _, e in ipairs(a.viewEvents) do redis.call('RPUSH', KEYS[6], e) end
redis.call('XADD', KEYS[7], 'MAXLEN', '~', a.eventsMaxLen, '*', 'e', a.event)
if a.reply then redis.call('SET', KEYS[8], a.reply, 'EX', a.dedupTtl) end
if a.entryId then redis.call('XACK', KEYS[10], a.group, a.entryId) end
return {1}

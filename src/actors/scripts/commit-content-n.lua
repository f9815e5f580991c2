-- Commits changes of contents of one partition, each atomically with its event. One call holds
-- one commit or several: ContentStore.commit sends the commits of a partition made in the same
-- turn of the event loop together, so that a burst (a bulk import, an actor's batch of stream
-- commands) costs Redis and the client one script call per partition, not one per content.
-- Each commit is checked and written on its own, as if alone: one refused changes no other.
-- Every key shares the partition hash tag, so this is valid on Redis Cluster.
--
-- KEYS: 12 per commit, in ARGV's order; those of commit i begin at KEYS[12 * (i - 1) + 1]:
--   +1  lease:{p}          the partition lease; the commit is fenced by its owner
--   +2  ct:{p}:<cid>       head of the content: rev, s (snapshot), h (its head version key),
--                          d ('<rev>:1': the snapshot of that revision is deleted, '<rev>:0': not;
--                          read by live-heads-n.lua without the snapshot, and believed only when
--                          its revision is the head's: a commit of an older build, which keeps no
--                          d, leaves one naming an earlier revision)
--   +3  rv:{p}:<cid>       snapshot of every revision
--   +4  vr:{p}:<cid>       versions, by version key
--   +5  vi:{p}:<cid>       version index (history), one entry per version
--   +6  vh:{p}:<cid>       view history, one entry per view event
--   +7  events:{p}         the partition's content event stream
--   +8  done:{p}:<cmdId>   the command's recorded reply (idempotent replay)
--   +9  dr:{p}:<cid>       workspace drafts of the content (a promote removes one)
--   +10 cmd:{p}           the partition's command stream (the command is acknowledged)
--   +11 cat:{p}           catalog: content key -> time of its last change (re-indexing by time)
--   +12 cat:{p}:t:<type>  catalog: content keys of one type (re-indexing by type)
-- ARGV[i]: the arguments of commit i, one MessagePack map (packScriptArgs in src/adapters/redis.ts);
-- a name left out is nil here:
--   owner                  the lease owner the commit expects
--   expectedRev            the head revision the change was made on (0: the content is new)
--   rev, snapshot, head    the new revision, its snapshot and its head version key (read with
--                          the snapshot by export-read-n.lua, which cannot decode the snapshot)
--   deleted                whether the new snapshot is deleted (a boolean), kept as d
--   versionKey, version, versionIndexEntry   the new version (left out: the change makes none)
--   event, eventsMaxLen    the event appended to the partition's stream, and the stream's bound
--   reply, dedupTtl        the reply recorded for a replay, for dedupTtl seconds (left out: none);
--                          a few facts that name what this commit writes, never a copy of it
--                          (src/actors/content/replays.ts)
--   ts                     time of this change (ms), for the catalog
--   group, entryId         the command's stream entry, acknowledged (left out: a local command)
--   promotedFrom, promotedSummary   the workspace whose draft the commit promotes, and the field
--                          of that draft's summary (commit-draft-4.lua); both removed (left out: none)
--   viewEvents             view history entries
-- Returns two numbers per commit, in ARGV's order: 1, 0 committed; -1, 0 lease lost; -2, rev
-- revision moved, with the head's revision (CommitOutcome in src/adapters/content-store.ts).
local out = {}
for i = 1, #ARGV do
  local k = 12 * (i - 1)
  local a = cmsgpack.unpack(ARGV[i])
  local cur = nil
  if redis.call('GET', KEYS[k + 1]) == a.owner then cur = tonumber(redis.call('HGET', KEYS[k + 2], 'rev') or '0') end
  if cur == nil then
    out[#out + 1] = -1
    out[#out + 1] = 0
  elseif cur ~= a.expectedRev then
    out[#out + 1] = -2
    out[#out + 1] = cur
  else
    redis.call('HSET', KEYS[k + 2], 'rev', a.rev, 's', a.snapshot, 'h', a.head, 'd', a.rev .. (a.deleted and ':1' or ':0'))
    redis.call('HSET', KEYS[k + 3], a.rev, a.snapshot)
    if a.versionKey then
      redis.call('HSET', KEYS[k + 4], a.versionKey, a.version)
      redis.call('RPUSH', KEYS[k + 5], a.versionIndexEntry)
    end
    if a.promotedFrom then redis.call('HDEL', KEYS[k + 9], a.promotedFrom, a.promotedSummary) end
    local cid = string.match(KEYS[k + 2], ':([^:]+)$')
    redis.call('ZADD', KEYS[k + 11], a.ts, cid)
    redis.call('SADD', KEYS[k + 12], cid)
    for _, e in ipairs(a.viewEvents) do redis.call('RPUSH', KEYS[k + 6], e) end
    redis.call('XADD', KEYS[k + 7], 'MAXLEN', '~', a.eventsMaxLen, '*', 'e', a.event)
    if a.reply then redis.call('SET', KEYS[k + 8], a.reply, 'EX', a.dedupTtl) end
    if a.entryId then redis.call('XACK', KEYS[k + 10], a.group, a.entryId) end
    out[#out + 1] = 1
    out[#out + 1] = 0
  end
end
return out

-- Writes (or removes) the draft of one content in one workspace, records the reply and
-- acknowledges the command, fenced by the partition lease like every commit.
-- KEYS[1] lease:{p}  KEYS[2] dr:{p}:<cid>  KEYS[3] done:{p}:<cmdId>  KEYS[4] cmd:{p}
-- ARGV[1] the arguments, one MessagePack map (packScriptArgs in src/adapters/redis.ts);
-- a name left out is nil here:
--   owner              the lease owner the commit expects
--   workspace, draft   the draft's workspace and its blob (draft left out: the draft is removed)
--   summaryField, summary   the field beside it that holds what a workspace listing needs of the
--                      draft (draft-list-n.lua) and what a promote needs of it before reading it
--                      (its origin: ContentStore.draftOrigin), and that summary; written with the
--                      draft in this one step, removed with the draft
--   reply, dedupTtl    the reply recorded for a replay, for dedupTtl seconds (left out: none);
--                      it names the draft, never holds it (src/actors/content/replays.ts)
--   group, entryId     the command's stream entry, acknowledged (left out: a local command)
-- Returns {1} committed, {-1} lease lost (CommitOutcome in src/adapters/content-store.ts).
local a = cmsgpack.unpack(ARGV[1])
if redis.call('GET', KEYS[1]) ~= a.owner then return {-1} end
if a.draft then
  redis.call('HSET', KEYS[2], a.workspace, a.draft, a.summaryField, a.summary)
else
  redis.call('HDEL', KEYS[2], a.workspace, a.summaryField)
end
if a.reply then redis.call('SET', KEYS[3], a.reply, 'EX', a.dedupTtl) end
if a.entryId then redis.call('XACK', KEYS[4], a.group, a.entryId) end
return {1}

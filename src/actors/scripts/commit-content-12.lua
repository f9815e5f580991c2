-- Commits one change of one content, atomically, and appends its event.
-- Every key shares the partition hash tag, so this is valid on Redis Cluster.
--
-- KEYS[1] lease:{p}          the partition lease; the commit is fenced by its owner
-- KEYS[2] ct:{p}:<cid>       head of the content: rev, s (snapshot)
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
-- ARGV[1] owner  ARGV[2] expected rev  ARGV[3] new rev  ARGV[4] snapshot
-- ARGV[5] version key ('' for none)  ARGV[6] version blob  ARGV[7] version index entry
-- ARGV[8] event blob  ARGV[9] events maxlen  ARGV[10] reply blob ('' records none)  ARGV[11] dedup ttl (s)
-- ARGV[12] time of this change (ms)  ARGV[13] group  ARGV[14] command entry id ('' when none)
-- ARGV[15] workspace whose draft the commit promotes ('' for none)
-- ARGV[16..] view history entries
-- Returns {1} committed, {-1} lease lost, {-2, rev} revision moved.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1} end
local cur = tonumber(redis.call('HGET', KEYS[2], 'rev') or '0')
if cur ~= tonumber(ARGV[2]) then return {-2, cur} end
redis.call('HSET', KEYS[2], 'rev', ARGV[3], 's', ARGV[4])
redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[5], ARGV[6])
  redis.call('RPUSH', KEYS[5], ARGV[7])
end
if ARGV[15] ~= '' then redis.call('HDEL', KEYS[9], ARGV[15]) end
local cid = string.match(KEYS[2], ':([^:]+)$')
redis.call('ZADD', KEYS[11], ARGV[12], cid)
redis.call('SADD', KEYS[12], cid)
for i = 16, #ARGV do redis.call('RPUSH', KEYS[6], ARGV[i]) end
redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[9], '*', 'e', ARGV[8])
if ARGV[10] ~= '' then redis.call('SET', KEYS[8], ARGV[10], 'EX', ARGV[11]) end
if ARGV[14] ~= '' then redis.call('XACK', KEYS[10], ARGV[13], ARGV[14]) end
return {1}

-- Writes (or removes) the draft of one content in one workspace, records the reply and
-- acknowledges the command, fenced by the partition lease like every commit.
-- KEYS[1] lease:{p}  KEYS[2] dr:{p}:<cid>  KEYS[3] done:{p}:<cmdId>  KEYS[4] cmd:{p}
-- ARGV[1] owner  ARGV[2] workspace  ARGV[3] draft blob ('' removes the draft)
-- ARGV[4] reply blob ('' records none)  ARGV[5] dedup ttl (s)  ARGV[6] group  ARGV[7] command entry id ('' when none)
-- Returns {1} committed, {-1} lease lost.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1} end
if ARGV[3] == '' then redis.call('HDEL', KEYS[2], ARGV[2]) else redis.call('HSET', KEYS[2], ARGV[2], ARGV[3]) end
if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5]) end
if ARGV[7] ~= '' then redis.call('XACK', KEYS[4], ARGV[6], ARGV[7]) end
return {1}

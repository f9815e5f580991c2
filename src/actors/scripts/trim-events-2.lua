-- Retention of the change feed by age: removes a partition's events older than a cut, and
-- records the last id removed and how many, so that a reader can tell whether anything after
-- its cursor is gone (XTRIM does not move XINFO's max-deleted-entry-id).
--
-- KEYS[1] events:{p}            the partition's event stream
-- KEYS[2] changes:trimmed:{p}   hash: id (the last entry removed by age), n (entries removed by age)
-- ARGV[1] the cut: an id; every entry below it is removed
-- Returns how many entries were removed.
local last = redis.call('XREVRANGE', KEYS[1], '(' .. ARGV[1], '-', 'COUNT', 1)
if #last == 0 then return 0 end
local n = redis.call('XTRIM', KEYS[1], 'MINID', ARGV[1])
redis.call('HSET', KEYS[2], 'id', last[1][1])
redis.call('HINCRBY', KEYS[2], 'n', n)
return n

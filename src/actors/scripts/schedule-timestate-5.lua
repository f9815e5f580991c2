-- Puts the time-state boundaries of committed revisions on a partition's schedule, in place of
-- their contents' boundaries scheduled before, and acknowledges the events they came from.
-- Each content keeps on the schedule at most the boundaries of its current windows: one that its
-- revision no longer has is taken off (it would be dropped without an event when it fired, and
-- held up every other content's boundary behind it until then: review s23d). One fired already
-- is not put back (an event read again after a crash must not bring back a boundary that fired);
-- one that passed and did not fire yet stays while the revision still has it. An older revision
-- than the one the content's boundaries were last set from (an event taken over from an owner
-- that died, after later ones) changes nothing. The content's entry in the fair queue is the time
-- of its earliest boundary on the schedule (none: no entry). Every key shares the partition hash
-- tag, so this is valid on Redis Cluster.
--
-- KEYS[1] changes:ts:{p}        the schedule: boundary member -> its time (ms)
-- KEYS[2] changes:ts-fired:{p}  boundaries fired
-- KEYS[3] changes:ts-by:{p}     content id -> JSON {r = revision, m = [its members on the schedule]}
-- KEYS[4] changes:ts-next:{p}   content id -> when its next boundary is to fire (the fair queue)
-- KEYS[5] events:{p}            the event stream (the ids are acknowledged in the group)
-- ARGV[1] group  ARGV[2] k, then k event ids; then per content: cid, revision, commit time (ms), n,
--   then n pairs (time, member): every boundary of the revision's windows, passed or not.
-- Returns how many boundaries were added.
local k = tonumber(ARGV[2])
local i = 3 + k
local added = 0
while i <= #ARGV do
  local cid, rev, cut, n = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local first = i + 4
  i = first + 2 * n
  local raw = redis.call('HGET', KEYS[3], cid)
  local old = raw and cjson.decode(raw) or nil
  if not old or rev >= old.r then
    local now, keep = {}, {}
    for j = first, i - 1, 2 do now[ARGV[j + 1]] = ARGV[j] end
    if old then
      for _, m in ipairs(old.m) do
        if now[m] and redis.call('ZSCORE', KEYS[1], m) then
          keep[#keep + 1] = m
          now[m] = nil
        else
          redis.call('ZREM', KEYS[1], m)
        end
      end
    end
    for j = first, i - 1, 2 do
      local at, m = ARGV[j], ARGV[j + 1]
      if now[m] and tonumber(at) > cut and not redis.call('ZSCORE', KEYS[2], m) then
        added = added + redis.call('ZADD', KEYS[1], at, m)
        keep[#keep + 1] = m
      end
    end
    if #keep > 0 then
      redis.call('HSET', KEYS[3], cid, cjson.encode({ r = rev, m = keep }))
      local first
      for _, m in ipairs(keep) do
        local t = tonumber(redis.call('ZSCORE', KEYS[1], m))
        if not first or t < first then first = t end
      end
      redis.call('ZADD', KEYS[4], first, cid)
    elseif old then
      redis.call('HDEL', KEYS[3], cid)
      redis.call('ZREM', KEYS[4], cid)
    end
  end
end
if k > 0 then redis.call('XACK', KEYS[5], ARGV[1], unpack(ARGV, 3, 2 + k)) end
return added

-- Puts time-state boundaries on a partition's schedule, except those fired already (an event
-- read again after a crash must not bring back a boundary that fired).
--
-- KEYS[1] changes:ts:{p}        the schedule: boundary member -> its time (ms)
-- KEYS[2] changes:ts-fired:{p}  boundaries fired
-- ARGV pairs: time (ms), member.  Returns how many were added.
local added = 0
for i = 1, #ARGV, 2 do
  if not redis.call('ZSCORE', KEYS[2], ARGV[i + 1]) then
    added = added + redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return added

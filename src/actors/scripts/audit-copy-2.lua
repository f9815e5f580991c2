-- Copies commit events of one partition into its audit trail and acknowledges them, atomically:
-- an event is in the trail exactly once, whether the copier dies before or after this step.
--
-- KEYS[1] events:{p}    the partition's content event stream (the `audit` group reads it)
-- KEYS[2] auditlog:{p}  the partition's audit trail
-- ARGV[1] the consumer group, ARGV[2] the oldest stream id kept (retention, trimmed with MINID ~),
-- then pairs: the event's stream id, the entry ('' for an event that is not audited: only acknowledged).
-- An entry keeps its event's stream id, so the trail is in commit order and a copy made twice
-- is seen. An event older than the trail's newest entry (taken over from a copier that died)
-- is appended with a new id and its own in `src`.
-- Returns the number of entries written.
local n = 0
for i = 3, #ARGV, 2 do
  local id, e = ARGV[i], ARGV[i + 1]
  if e ~= '' then
    local r = redis.pcall('XADD', KEYS[2], 'MINID', '~', ARGV[2], id, 'e', e)
    if type(r) == 'table' and r.err then
      if #redis.call('XRANGE', KEYS[2], id, id) == 0 then
        redis.call('XADD', KEYS[2], 'MINID', '~', ARGV[2], '*', 'e', e, 'src', id)
        n = n + 1
      end
    else
      n = n + 1
    end
  end
  redis.call('XACK', KEYS[1], ARGV[1], id)
end
return n

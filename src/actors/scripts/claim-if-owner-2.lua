-- XAUTOCLAIM of a partition's command stream, only by the owner of its lease: a loop that has not
-- yet seen its lease go must not take commands the new owner has in hand.
-- KEYS[1] lease:{p}  KEYS[2] cmd:{p}
-- ARGV[1] owner (the consumer)  ARGV[2] group  ARGV[3] min idle ms  ARGV[4] start  ARGV[5] count
-- Returns XAUTOCLAIM's answer, or nil when the caller does not hold the lease.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
return redis.call('XAUTOCLAIM', KEYS[2], ARGV[2], ARGV[1], ARGV[3], ARGV[4], 'COUNT', ARGV[5])

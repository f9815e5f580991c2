-- Extends a partition lease if the caller still owns it.
-- KEYS[1] lease:{p}  ARGV[1] owner  ARGV[2] lease ms.  Returns 1 when renewed, 0 when lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0

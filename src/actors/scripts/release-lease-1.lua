-- Gives a partition lease up, only if the caller owns it (a graceful hand-over).
-- KEYS[1] lease:{p}  ARGV[1] owner.  Returns 1 when released.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0

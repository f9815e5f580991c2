-- Takes one login attempt against a window of failures, or refuses it (CONTRACT §20 "Tokens").
-- An attempt is held as pending ('p:<id>') while its password is checked, then becomes a failure
-- ('f:<id>', login-failed-1.lua) or is removed (a success). Failures and pending attempts
-- together never exceed the limit, so many attempts at once cannot get more than ARGV[2]
-- password checks to fail; a pending attempt older than ARGV[4] counts as a failure (its
-- process is gone).
--
-- KEYS[1] <prefix>login-failures:<user|address>:<id>  sorted set: p:/f:<attempt id> -> time (ms)
-- ARGV[1] window (ms)  ARGV[2] failures allowed in the window  ARGV[3] attempt id
-- ARGV[4] how long an attempt may stay pending (ms)
-- Returns 0 when the attempt is taken; -1 when it must wait for pending attempts to end;
-- else the ms until the window lets one more failure in.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local allowed = tonumber(ARGV[2])
local stale = now - tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local failed = {}
local pending = 0
for i = 1, #entries, 2 do
  local score = tonumber(entries[i + 1])
  if string.sub(entries[i], 1, 2) == 'f:' or score < stale then
    failed[#failed + 1] = score
  else
    pending = pending + 1
  end
end
if #failed >= allowed then
  -- Entries come oldest first: the failure whose leaving brings the count below the limit.
  return math.max(1, failed[#failed - allowed + 1] + window - now)
end
if #failed + pending >= allowed then return -1 end
redis.call('ZADD', KEYS[1], now, 'p:' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return 0

-- A login attempt taken by login-attempt-1.lua failed: it counts as a failure for the window.
-- KEYS[1] <prefix>login-failures:<user|address>:<id>
-- ARGV[1] window (ms)  ARGV[2] attempt id
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[1], 'p:' .. ARGV[2])
redis.call('ZADD', KEYS[1], now, 'f:' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
return 1

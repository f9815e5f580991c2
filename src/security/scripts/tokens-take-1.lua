-- Takes a place for a new token in its user's record of live tokens, or refuses it
-- (SECURITY.md "Tokens and logins": TOKENS_PER_USER_MAX). Tokens that expired leave the record
-- first; a revocation takes its token out (TokenService.revoke); an account change deletes the
-- record. The record expires with its newest token.
--
-- KEYS[1] <prefix>user-tokens:<sha256(user id)>  sorted set: token digest -> expiry (ms)
-- ARGV[1] now (ms)  ARGV[2] live tokens allowed  ARGV[3] the new token's digest  ARGV[4] its expiry (ms)
-- Returns 0 when the place is taken; else the ms until the oldest live token expires.
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) - now)
end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', math.max(tonumber(newest[2]), tonumber(ARGV[4]))))
return 0

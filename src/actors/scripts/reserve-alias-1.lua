-- Claims a global alias for a content. Aliases span slots, so this is its own atomic step
-- beside the content commit (with compensation: release-alias-1).
-- KEYS[1] alias:<namespace>/<alias>  ARGV[1] content key.
-- Returns 1 when the alias is (now, or already) the content's, 0 when another content holds it.
local cur = redis.call('GET', KEYS[1])
if cur == false then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
if cur == ARGV[1] then return 1 end
return 0

-- Frees a global alias only while it still points at the given content
-- (compensation after a failed commit, and release on delete).
-- KEYS[1] alias:<namespace>/<alias>  ARGV[1] its value (content key, or `~<workspace>|<key>`).
-- Returns 1 when freed.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0

-- Claims a global alias for a content. Aliases span slots, so this is its own atomic step
-- beside the content commit (with compensation: release-alias-1).
-- The value is the content key when assigned in main, `~<workspace>|<content key>` when a
-- workspace draft reserves it (usable on that workspace only, refused to other content):
-- the two forms of aliasValue in src/content/aliases.ts.
-- KEYS[1] alias:<namespace>/<alias>  ARGV[1] content key  ARGV[2] workspace ('' for main)
-- Returns 1 when the alias is (now, or already) the content's, 0 when another content holds it.
local cur = redis.call('GET', KEYS[1])
local cid = ARGV[1]
local mine = cur == cid or (cur and string.sub(cur, 1, 1) == '~' and string.sub(cur, -(#cid + 1)) == '|' .. cid)
if cur and not mine then return 0 end
if ARGV[2] == '' then
  if cur ~= cid then redis.call('SET', KEYS[1], cid) end
elseif not cur then
  redis.call('SET', KEYS[1], '~' .. ARGV[2] .. '|' .. cid)
end
return 1

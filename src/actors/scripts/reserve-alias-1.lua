-- Claims a global alias for a content. Aliases span slots, so this is its own atomic step
-- beside the content commit (with compensation: release-alias-1).
-- The value is the content key when assigned in main, `~<workspace>|<content key>` when a
-- workspace draft reserves it (usable on that workspace only, refused to other content):
-- the two forms of aliasValue in src/content/aliases.ts.
-- KEYS[1] alias:<namespace>/<alias>  ARGV[1] content key  ARGV[2] workspace ('' for main)
-- Returns 1 when the alias is (now, or already) the content's, 0 when another content holds it.
-- A reservation is one workspace's: for a workspace the alias is the content's when it holds the
-- content key or `~<that workspace>|<content key>`, and a reservation of another workspace's draft
-- of the same content answers 0 as another content's would (else that draft's delete freed the
-- alias under this one, and another content could take it before this draft's promote). Main
-- (a write or a promote, which comes without its workspace) takes the content's own reservation
-- of any workspace.
local cur = redis.call('GET', KEYS[1])
local cid = ARGV[1]
local ws = ARGV[2]
local mine
if ws == '' then
  mine = cur == cid or (cur and string.sub(cur, 1, 1) == '~' and string.sub(cur, -(#cid + 1)) == '|' .. cid)
else
  mine = cur == cid or cur == '~' .. ws .. '|' .. cid
end
if cur and not mine then return 0 end
if ws == '' then
  if cur ~= cid then redis.call('SET', KEYS[1], cid) end
elseif not cur then
  redis.call('SET', KEYS[1], '~' .. ws .. '|' .. cid)
end
return 1

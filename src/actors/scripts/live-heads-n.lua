-- Whether each of several contents exists and is not deleted, without reading its snapshot: per
-- head hash KEYS[i] (ct:{p}:<cid>), 1 when its field `d` (written by commit-content-n.lua beside
-- the snapshot) says the head's revision is not deleted, 0 when it says it is or the hash does not
-- exist. A head whose `d` is missing (committed before it was kept) or names another revision
-- (an older build committed since, while builds ran side by side) answers its snapshot `s`
-- instead (the caller decodes it), as all of them were read before. So what a call costs does
-- not depend on how large the contents are.
-- The hashes of one partition share its hash tag, so this holds on Redis Cluster too.
-- (Read-only; `n`: the caller gives the number of keys.)
local out = {}
for i = 1, #KEYS do
  local head = redis.call('HMGET', KEYS[i], 'rev', 'd')
  local rev, d = head[1], head[2]
  if not rev then
    out[i] = 0
  elseif d == rev .. ':0' then
    out[i] = 1
  elseif d == rev .. ':1' then
    out[i] = 0
  else
    out[i] = redis.call('HGET', KEYS[i], 's') or 0
  end
end
return out

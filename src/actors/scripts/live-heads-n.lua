-- Whether each of several contents exists and is not deleted, without reading its snapshot: per
-- head hash KEYS[i] (ct:{p}:<cid>), 1 when its field `d` (written by commit-content-n.lua beside
-- the snapshot) is '0', 0 when it is '1' or the hash does not exist; a head committed before `d`
-- was kept has none, and its snapshot `s` is answered instead (the caller decodes it), as all of
-- them were read before. So what a call costs does not depend on how large the contents are.
-- The hashes of one partition share its hash tag, so this holds on Redis Cluster too.
-- (Read-only; `n`: the caller gives the number of keys.)
local out = {}
for i = 1, #KEYS do
  local d = redis.call('HGET', KEYS[i], 'd')
  if d == '0' then
    out[i] = 1
  elseif d then
    out[i] = 0
  else
    out[i] = redis.call('HGET', KEYS[i], 's') or 0
  end
end
return out

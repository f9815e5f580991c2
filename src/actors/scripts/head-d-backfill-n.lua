-- Writes the field `d` of heads committed before it was kept, from each head's own snapshot, so
-- that live-heads-n.lua answers them without their snapshot (src/actors/head-d-backfill.ts runs
-- it once per partition). Per head hash KEYS[i] (ct:{p}:<cid>), in order: a head whose `d` names
-- its revision is left as it is; otherwise its snapshot `s` is decoded and `d` written with the
-- rule of commit-content-n.lua: '<rev>:1' when the snapshot's `deleted` is true, '<rev>:0' when
-- not. rev, s and d are read and written in one step, as the commit writes them, so a commit
-- before or after it leaves its own `d`, never this one's of another revision.
-- ARGV[1]: a budget of snapshot bytes decoded per call (HSTRLEN, read before each decode); the
-- head that would take the total past it ends the call, unless it is the first (a call always
-- moves on). The caller sends the heads left out again.
-- Answers one number per head handled, in order, fewer than #KEYS when the budget ended the call:
--   0 no head (no hash, no rev, not a hash)   1 `d` was right already
--   2 written '<rev>:0'                        3 written '<rev>:1'
--  -1 left as it was: no snapshot, or one cmsgpack cannot read (it is still answered whole)
-- The hashes of one partition share its hash tag, so this holds on Redis Cluster too.
-- (`n`: the caller gives the number of keys.)
local budget = tonumber(ARGV[1])
local total = 0
local out = {}
for i = 1, #KEYS do
  local head = redis.pcall('HMGET', KEYS[i], 'rev', 'd')
  local rev, d = nil, nil
  if not head.err then rev, d = head[1], head[2] end
  if not rev then
    out[i] = 0
  elseif d == rev .. ':0' or d == rev .. ':1' then
    out[i] = 1
  else
    local len = redis.call('HSTRLEN', KEYS[i], 's')
    if i > 1 and total + len > budget then break end
    total = total + len
    local ok, snap = false, nil
    if len > 0 then ok, snap = pcall(cmsgpack.unpack, redis.call('HGET', KEYS[i], 's')) end
    if not ok or type(snap) ~= 'table' then
      out[i] = -1
    elseif snap.deleted == true then
      redis.call('HSET', KEYS[i], 'd', rev .. ':1')
      out[i] = 3
    else
      redis.call('HSET', KEYS[i], 'd', rev .. ':0')
      out[i] = 2
    end
  end
end
return out

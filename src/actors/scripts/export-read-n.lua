-- Reads what an export line is made of, for several contents of one partition in one call:
-- KEYS[i] is the head hash of content i (ct:{p}:<cid>) and KEYS[n+i] its versions hash
-- (vr:{p}:<cid>), for i = 1..n. Answers, per content, its stored snapshot and, unless ARGV[1] is
-- '0', the stored version its head names (field h, written by commit-content-n.lua):
-- {s1, v1, s2, v2, ...}, nil where missing (a content gone, a head written before the field
-- existed, a version in the archive, versions not asked for). The export asks for snapshots only:
-- it reads the versions of the contents it writes once it knows which (a caller's export must not
-- read the versions of content it may not read). The keys of one partition share its hash tag, so
-- this holds on Redis Cluster too. Read-only.
local n = #KEYS / 2
local versions = ARGV[1] ~= '0'
local out = {}
for i = 1, n do
  local sh = redis.call('HMGET', KEYS[i], 's', 'h')
  out[2 * i - 1] = sh[1]
  out[2 * i] = versions and sh[2] and redis.call('HGET', KEYS[n + i], sh[2])
end
return out

-- Reads what an export line is made of, for several contents of one partition in one call:
-- KEYS[i] is the head hash of content i (ct:{p}:<cid>) and KEYS[n+i] its versions hash
-- (vr:{p}:<cid>), for i = 1..n. Answers, per content, its stored snapshot and, unless ARGV[1] is
-- '0', the stored version its head names (field h, written by commit-content-n.lua):
-- {s1, v1, s2, v2, ...}, nil where missing (a content gone, a head written before the field
-- existed, a version in the archive, versions not asked for). With ARGV[2], the versions read
-- stop at the first that would take their total length past ARGV[2] bytes (HSTRLEN, read before
-- the value; the first version is read whatever its length): that one and every later one are
-- answered nil. A caller's export asks for versions only when the caller may read every content
-- (it must not read the versions of content it may not read); otherwise it reads them once it
-- knows which. With ARGV[3], the contents read stop at the first whose snapshot would take the
-- snapshots' total length past ARGV[3] bytes (the first content is read whatever its length):
-- fewer than n contents are answered, {s1, v1, ..., sk, vk}. (ARGV[2] '' : no versions' budget.)
-- The keys of one partition share its hash tag, so this holds on Redis Cluster too. Read-only.
local n = #KEYS / 2
local versions = ARGV[1] ~= '0'
local budget = tonumber(ARGV[2])
local snapshots = tonumber(ARGV[3])
local total = 0
local read = 0
local stotal = 0
local out = {}
for i = 1, n do
  if snapshots then
    local slen = redis.call('HSTRLEN', KEYS[i], 's')
    if i > 1 and stotal + slen > snapshots then
      break
    end
    stotal = stotal + slen
  end
  local sh = redis.call('HMGET', KEYS[i], 's', 'h')
  out[2 * i - 1] = sh[1]
  local v = false
  if versions and sh[2] then
    if budget then
      local len = redis.call('HSTRLEN', KEYS[n + i], sh[2])
      if read > 0 and total + len > budget then
        versions = false
      else
        v = redis.call('HGET', KEYS[n + i], sh[2])
        if v then
          total = total + len
          read = read + 1
        end
      end
    else
      v = redis.call('HGET', KEYS[n + i], sh[2])
    end
  end
  out[2 * i] = v
end
return out

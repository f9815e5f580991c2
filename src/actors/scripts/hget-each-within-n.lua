-- hget-each-n.lua within a byte budget: field ARGV[2 + i] of hash KEYS[i], in order, up to the
-- first value that would take the values' total length past ARGV[1] bytes (HSTRLEN, read before
-- the value), which is left out with all after it. ARGV[2] '1': the first value is answered
-- whatever its length (a reader that must move on). Answers the values read, nil where a hash or
-- field is missing; fewer than #KEYS when the budget ended the read. The hashes of one partition
-- share its hash tag, so this holds on Redis Cluster too. (Read-only; `n`: the caller gives the
-- number of keys.)
local budget = tonumber(ARGV[1])
local out = {}
local total = 0
for i = 1, #KEYS do
  local len = redis.call('HSTRLEN', KEYS[i], ARGV[i + 2])
  if total + len > budget and not (i == 1 and ARGV[2] == '1') then
    break
  end
  total = total + len
  out[i] = redis.call('HGET', KEYS[i], ARGV[i + 2])
end
return out

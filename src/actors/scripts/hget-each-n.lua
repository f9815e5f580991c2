-- Reads one field of each of several hashes in one call: KEYS[i] field ARGV[i], for every i.
-- The hashes of one partition share its hash tag, so this holds on Redis Cluster too. Answers the
-- values in order, nil where a hash or field is missing. (Read-only; the file name's `n`: the
-- caller gives the number of keys.)
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('HGET', KEYS[i], ARGV[i])
end
return out

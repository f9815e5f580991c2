-- What a workspace listing needs of several contents of one partition, in one call, without
-- reading any draft: KEYS[i] is the drafts hash of content i (dr:{p}:<cid>) and KEYS[n+i] its
-- head hash (ct:{p}:<cid>), for i = 1..n; ARGV[1] the workspace (the field of its draft) and
-- ARGV[2] the field of its draft's summary (draftSummaryField in src/adapters/redis.ts).
-- Answers, per content: the length of its draft on the workspace (0: none), the summary kept
-- beside it by commit-draft-4.lua, and the content's stored snapshot (field s of
-- commit-content-n.lua): {len1, summary1, s1, len2, ...}, nil where missing (a draft stored
-- before summaries were kept has none). The keys of one partition share its hash tag, so this
-- holds on Redis Cluster too. Read-only.
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local len = redis.call('HSTRLEN', KEYS[i], ARGV[1])
  out[3 * i - 2] = len
  out[3 * i - 1] = len > 0 and redis.call('HGET', KEYS[i], ARGV[2])
  out[3 * i] = len > 0 and redis.call('HGET', KEYS[n + i], 's')
end
return out

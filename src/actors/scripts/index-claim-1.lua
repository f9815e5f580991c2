-- The indexer's claim on the documents it is about to send (src/actors/index-writer.ts), before
-- it sends anything to the search engine: for each content, the root documents the index may
-- hold (what the record kept) are answered, and the documents about to be sent are added to the
-- record, so that a crash after the engine took them still leaves them recorded. The writer is
-- noted in flight until ARGV[2] ms from now; writers in flight on the same content at once are
-- all marked overlapped, and an overlapped writer never shrinks the record (index-settle-1.lua).
-- A content without a record (indexed before records were kept, or gone since) gets one marked
-- unswept (`u`): the index may hold documents of it that the record does not name, so the
-- answer is false, as for no record, until a writer has deleted them by query and settled.
-- KEYS[1] ixd:{p}: content id -> JSON {"k": [record keys], "w": {writer: [until ms, overlapped 0/1]}, "u": 1}
-- ARGV[1] the writer's token  ARGV[2] its lease (ms)
-- then per content: its id, the number n of its documents, their n record keys
-- Returns per content the keys the record kept before this claim, or false (no record, or unswept).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
local expires = now + tonumber(ARGV[2])
local out = {}
local i = 3
while i <= #ARGV do
  local cid = ARGV[i]
  local n = tonumber(ARGV[i + 1])
  local raw = redis.call('HGET', KEYS[1], cid)
  local rec = raw and cjson.decode(raw) or nil
  local old = rec and rec.k or {}
  if rec and not rec.u then
    out[#out + 1] = old
  else
    out[#out + 1] = false
  end
  local kept, seen = {}, {}
  for _, key in ipairs(old) do
    if not seen[key] then
      seen[key] = true
      kept[#kept + 1] = key
    end
  end
  for j = i + 2, i + 1 + n do
    local key = ARGV[j]
    if not seen[key] then
      seen[key] = true
      kept[#kept + 1] = key
    end
  end
  -- A writer past its lease is dropped (a dead process): what it claimed stays kept.
  local writers, beside = {}, false
  if rec and rec.w then
    for w, c in pairs(rec.w) do
      if c[1] > now then
        writers[w] = { c[1], 1 }
        beside = true
      end
    end
  end
  writers[token] = { expires, beside and 1 or 0 }
  redis.call('HSET', KEYS[1], cid, cjson.encode({ k = kept, w = writers, u = (not rec or rec.u) and 1 or nil }))
  i = i + 2 + n
end
return out

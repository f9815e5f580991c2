-- The indexer settles its claim (index-claim-1.lua) once the search engine took its documents
-- and the deletes of the stale ones. The record keeps exactly the content's documents now when
-- no other writer was in flight beside this one (the engine then holds no other root document of
-- the content); else, or when the claim was lost (past its lease), it keeps what it kept and the
-- writer's documents: never less than the index may hold. A writer that deleted the content's
-- documents by query (its claim answered false) clears the mark `u`. A release (ARGV[2] = '1',
-- after a failure the engine will apply nothing more of) only ends the claim, and creates no
-- record. A content gone whose record is then empty, with no writer in flight, leaves nothing.
-- KEYS[1] ixd:{p}  ARGV[1] the writer's token  ARGV[2] '1': release, '0': settle
-- then per content: its id, gone (1/0), swept (1/0), the number n of its documents, their n record keys
-- Returns the number of records removed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
local release = ARGV[2] == '1'
local removed = 0
local i = 3
while i <= #ARGV do
  local cid = ARGV[i]
  local gone = ARGV[i + 1] == '1'
  local swept = ARGV[i + 2] == '1'
  local n = tonumber(ARGV[i + 3])
  local raw = redis.call('HGET', KEYS[1], cid)
  if raw or not release then
    local rec = raw and cjson.decode(raw) or { k = {} }
    local mine = rec.w and rec.w[token]
    local writers, beside = {}, false
    if rec.w then
      for w, c in pairs(rec.w) do
        if w ~= token and c[1] > now then
          writers[w] = c
          beside = true
        end
      end
    end
    local kept, seen = {}, {}
    if release or not mine or mine[2] ~= 0 then
      for _, key in ipairs(rec.k) do
        if not seen[key] then
          seen[key] = true
          kept[#kept + 1] = key
        end
      end
    end
    for j = i + 4, i + 3 + n do
      local key = ARGV[j]
      if not seen[key] then
        seen[key] = true
        kept[#kept + 1] = key
      end
    end
    local unswept = rec.u and (release or not swept)
    if #kept == 0 and gone and not beside then
      removed = removed + redis.call('HDEL', KEYS[1], cid)
    else
      redis.call('HSET', KEYS[1], cid, cjson.encode({ k = kept, w = beside and writers or nil, u = unswept and 1 or nil }))
    end
  end
  i = i + 4 + n
end
return removed

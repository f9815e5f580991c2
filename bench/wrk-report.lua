-- wrk script of `npm run bench` (bench/bench.ts): one request shape for every HTTP workload and
-- for the uWebSockets.js ceiling, so both pay the same Lua cost per request. At the end it prints
-- one line `RESULT {json}`: requests, duration, errors, latency p50/p90/p99/p999 (microseconds)
-- and, with WRK_STATUSES=1, the count of each status code.
--
-- Environment (all optional):
--   TOKEN          sent as X-Auth-Token
--   WRK_METHOD     GET (default), POST, ...
--   WRK_BODY_FILE  the request body (sent as application/json)
--   WRK_PATHS      a file of request paths, one a line, taken in turn (each thread starts elsewhere);
--                  without it every request goes to the URL's path
--   WRK_ADDRS      host:port,host:port,...: thread i connects to the (i mod n)-th (several gateways)
--   WRK_STATUSES   1: count every status code (else only wrk's count of answers >= 400)
--   WRK_DELAY_MS   a pause before each request of a connection: about connections / (pause +
--                  latency) requests a second, so that setups are compared at like rates
--
-- wrk -t1 -c50 -d8s --latency -s bench/wrk-report.lua http://127.0.0.1:PORT/path

local threads = {}
local counter = 0
local addrs = nil

function setup(thread)
  local list = os.getenv("WRK_ADDRS")
  if list ~= nil and list ~= "" then
    if addrs == nil then
      addrs = {}
      for hp in string.gmatch(list, "[^,]+") do
        local host, port = string.match(hp, "^(.*):(%d+)$")
        table.insert(addrs, wrk.lookup(host, port)[1])
      end
    end
    thread.addr = addrs[(counter % #addrs) + 1]
  end
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local token = os.getenv("TOKEN")
if token ~= nil and token ~= "" then wrk.headers["X-Auth-Token"] = token end
local method = os.getenv("WRK_METHOD")
if method ~= nil and method ~= "" then wrk.method = method end
local bodyFile = os.getenv("WRK_BODY_FILE")
if bodyFile ~= nil and bodyFile ~= "" then
  local f = assert(io.open(bodyFile, "rb"))
  wrk.body = f:read("*a")
  f:close()
  wrk.headers["Content-Type"] = "application/json"
end

local paths = nil
local at = 0
local fixed = nil

function init(args)
  statuses = {}
  local pathsFile = os.getenv("WRK_PATHS")
  if pathsFile ~= nil and pathsFile ~= "" then
    paths = {}
    for line in io.lines(pathsFile) do
      if line ~= "" then table.insert(paths, line) end
    end
    if #paths == 0 then error("WRK_PATHS " .. pathsFile .. " is empty") end
    at = ((tid or 0) * 7919) % #paths
  else
    fixed = wrk.format()
  end
end

function request()
  if paths ~= nil then
    at = at % #paths + 1
    return wrk.format(nil, paths[at])
  end
  return fixed
end

local pause = tonumber(os.getenv("WRK_DELAY_MS") or "")
if pause ~= nil and pause > 0 then
  function delay()
    return pause
  end
end

-- Counting statuses costs wrk about 2 us of CPU per request (headers and body handed to Lua),
-- so it is only done when asked; without it, wrk's own count of answers >= 400 is reported.
if os.getenv("WRK_STATUSES") == "1" then
  function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    if s ~= nil then
      for k, v in pairs(s) do all[k] = (all[k] or 0) + v end
    end
  end
  local parts = {}
  for k, v in pairs(all) do table.insert(parts, string.format('"%d":%d', k, v)) end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"durationUs":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"mean":%.1f,"stdev":%.1f,"max":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d},' ..
    '"statuses":{%s}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    table.concat(parts, ",")))
end

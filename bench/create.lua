-- wrk script: POST one article envelope per request to {base_url}/content.
-- Token from the TOKEN environment variable (bench/wrk-quick.sh logs in as editor).
-- Usage: TOKEN=... wrk -t1 -c50 -d10s --latency -s bench/create.lua http://HOST:PORT/content-service/content
local token = os.getenv("TOKEN")
if token == nil or token == "" then
  error("TOKEN is not set")
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Auth-Token"] = token
wrk.body = '{"system":{"contentType":"article"},"aspects":{'
  .. '"body":{"_type":"body","title":"Benchmark article","lead":"A short lead for the benchmark.",'
  .. '"text":"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",'
  .. '"tags":["bench","wrk","article"]},'
  .. '"byline":{"_type":"byline","author":"Bench Writer"}}}'

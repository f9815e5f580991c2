#!/usr/bin/env bash
# Quick load test of the gateway with wrk (versioned read, create).
#
# Starts a private redis-server (no persistence) and the platform on free ports, logs in as
# editor, creates one content, then runs:
#   (a) versioned read: wrk -t1 -c50 -d10s --latency -H 'X-Auth-Token: ...' <versioned URL>
#   (b) create:         wrk -t1 -c50 -d10s --latency -s bench/create.lua <base>/content
# prints req/s, p50, p99 and errors for each, and stops everything it started.
#
# Environment: DURATION (10s), CONNS (50), THREADS (1), BUILD (1: tsc into dist/ first;
# 0: run the existing dist/), RUN_TSX (1: run src/main.ts with tsx instead of dist/),
# CPU_PROF (a directory: run node with --cpu-prof into it), KEEP_LOGS (1: keep the temp dir),
# SPLIT (1: run the `web` and `actors` roles of the Procfile as two processes instead of one),
# ROLES (e.g. "web actors": the roles of the one process; default all, indexing into Solr).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
BUILD=${BUILD:-1}
RUN_TSX=${RUN_TSX:-0}

for tool in wrk redis-server redis-cli curl node; do
  command -v "$tool" >/dev/null || { echo "missing: $tool (wrk: apt-get install -y wrk)" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/wrk-quick.XXXXXX)
REDIS_PID=''
APP_PID=''
ACTORS_PID=''

stop_pid() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid"
}

cleanup() {
  set +e
  stop_pid "$APP_PID"
  stop_pid "$ACTORS_PID"
  stop_pid "$REDIS_PID"
  if [ "${KEEP_LOGS:-0}" = 1 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# --- Redis ---
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --daemonize no --loglevel warning >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 1 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" ping >/dev/null || { echo "redis-server did not start:" >&2; cat "$WORK/redis.log" >&2; exit 1; }

# --- platform ---
NODE_ARGS=()
if [ -n "${CPU_PROF:-}" ]; then mkdir -p "$CPU_PROF"; NODE_ARGS+=(--cpu-prof --cpu-prof-dir "$CPU_PROF"); fi
if [ "$RUN_TSX" = 1 ]; then
  ENTRY=(--import tsx src/main.ts)
else
  if [ "$BUILD" = 1 ]; then
    echo "building (npx tsc -p tsconfig.json) ..."
    npx tsc -p tsconfig.json >"$WORK/tsc.log" 2>&1 || { echo "warning: tsc reported errors (JS was still emitted):" >&2; head -20 "$WORK/tsc.log" >&2; }
  fi
  [ -f dist/src/main.js ] || { echo "dist/src/main.js missing: build first" >&2; exit 1; }
  ENTRY=(dist/src/main.js)
fi
APP_PORT=$(free_port)
# ROLES="web actors": leave out the indexer (no Solr work during the create run).
read -r -a ROLES <<<"${ROLES:-}"
if [ "${SPLIT:-0}" = 1 ]; then
  ROLES=(web)
  REDIS_URL="redis://127.0.0.1:$REDIS_PORT" LOG_LEVEL=warn NODE_ENV=development \
    node "${NODE_ARGS[@]}" "${ENTRY[@]}" actors >"$WORK/actors.log" 2>&1 &
  ACTORS_PID=$!
fi
REDIS_URL="redis://127.0.0.1:$REDIS_PORT" PORT="$APP_PORT" HOST=127.0.0.1 LOG_LEVEL=warn NODE_ENV=development \
  node "${NODE_ARGS[@]}" "${ENTRY[@]}" "${ROLES[@]}" >"$WORK/app.log" 2>&1 &
APP_PID=$!
BASE="http://127.0.0.1:$APP_PORT"
for _ in $(seq 1 150); do
  curl -fsS "$BASE/health" >/dev/null 2>&1 && break
  kill -0 "$APP_PID" 2>/dev/null || { echo "platform exited:" >&2; cat "$WORK/app.log" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "$BASE/health" >/dev/null || { echo "platform not healthy:" >&2; cat "$WORK/app.log" >&2; exit 1; }

json_field() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s)[process.argv[1]];if(v===undefined)process.exit(1);console.log(v)})' "$1"; }

TOKEN=$(curl -fsS -H 'Content-Type: application/json' -d '{"username":"editor","password":"editor"}' "$BASE/content-service/security/token" | json_field token)
export TOKEN
VERSIONED=$(curl -fsS -o /dev/null -w '%header{location}' -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
  -d '{"system":{"contentType":"article"},"aspects":{"body":{"_type":"body","title":"Read me","text":"Benchmark content."}}}' \
  "$BASE/content-service/content")
[ -n "$VERSIONED" ] || { echo "create did not answer a Location" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Auth-Token: $TOKEN" "$VERSIONED")
[ "$code" = 200 ] || { echo "versioned read answers $code" >&2; exit 1; }

summarize() { # name, wrk output file
  awk -v name="$1" '
    /Requests\/sec:/ { rps = $2 }
    /^ +50%/ { p50 = $2 } /^ +90%/ { p90 = $2 } /^ +99%/ { p99 = $2 }
    /requests in/ { total = $1 }
    /Non-2xx or 3xx responses:/ { non2xx = $5 }
    /Socket errors:/ { sock = $0; sub(/^ +Socket errors: /, "", sock) }
    END {
      printf "%-15s %10s req/s  p50 %-9s p90 %-9s p99 %-9s requests %s  non-2xx/3xx %s  socket errors %s\n",
        name, rps, p50, p90, p99, total, (non2xx == "" ? 0 : non2xx), (sock == "" ? "none" : sock)
    }' "$2"
}

echo
echo "== (a) versioned read: $VERSIONED"
echo "   wrk -t$THREADS -c$CONNS -d$DURATION --latency -H 'X-Auth-Token: <editor token>' $VERSIONED"
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "X-Auth-Token: $TOKEN" "$VERSIONED" | tee "$WORK/read.txt"

echo
echo "== (b) create: POST $BASE/content-service/content"
echo "   TOKEN=<editor token> wrk -t$THREADS -c$CONNS -d$DURATION --latency -s bench/create.lua $BASE/content-service/content"
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s bench/create.lua "$BASE/content-service/content" | tee "$WORK/create.txt"

echo
echo "== summary (budget: versioned read >= 20000 req/s, p99 < 5 ms; create >= 5000 req/s, p99 < 20 ms)"
summarize 'versioned read' "$WORK/read.txt"
summarize 'create' "$WORK/create.txt"
for log in "$WORK"/app.log "$WORK"/actors.log; do
  [ -f "$log" ] || continue
  if grep -qiE '"level":(50|60)|error' "$log"; then
    echo "$(basename "$log") has errors (first lines):"; grep -iE '"level":(50|60)|error' "$log" | head -5
  fi
done

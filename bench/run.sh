#!/usr/bin/env bash
# npm run bench: the performance budget of ARCHITECTURE.md on this machine (bench/bench.ts).
# Starts the platform (every role in one process, then the fleet of src/fleet.ts) on a private
# Redis and the embedded Solr, measures the ceilings of the machine (a raw uWebSockets.js handler,
# the Redis round trip of the commit script), runs every workload with its load generator (wrk or
# a node script) in its own process, and writes bench/results.json and the generated part of
# bench/RESULTS.md. About 5 minutes (under 10) on 2 cores.
#
#   npm run bench                      the full run
#   BENCH_QUICK=1 npm run bench        a smoke run (2 s workloads, small sizes; output in .cache/bench-quick/)
#   BENCH_ONLY=read,create npm run bench   a subset (see bench/bench.ts for every knob)
#
# Output also goes to .cache/bench-<time>.log. Never part of npm test, and refused in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${CI:-}" ] && [ "${BENCH_IN_CI:-0}" != 1 ]; then
  echo "bench: not run in CI (CI=$CI); it needs the machine to itself for minutes" >&2
  exit 0
fi
sh scripts/ensure-deps.sh
if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench: installing wrk (apt-get)" >&2
    sh scripts/apt-install.sh wrk || true
    command -v wrk >/dev/null 2>&1 || { echo "bench: wrk could not be installed (apt-get install wrk)" >&2; exit 2; }
  else
    echo "bench: wrk is missing (apt-get install wrk)" >&2; exit 2
  fi
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null 2>&1 || echo "bench: $tool is missing: the embedded Solr cannot run, so the search workloads will fail (apt-get install default-jdk-headless maven)" >&2
done
mkdir -p .cache
LOG=".cache/bench-$(date +%Y%m%d-%H%M%S).log"
set +e
node --import tsx bench/bench.ts 2>&1 | tee "$LOG"
code=${PIPESTATUS[0]}
set -e
echo "log: $LOG"
exit "$code"

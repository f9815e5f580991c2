#!/usr/bin/env bash
# Soak run (issue 16): `npm test` N times in a row on a clean clone of HEAD while `npm run bench`
# runs beside it in a loop, so the suite is shown not to flake on a loaded machine.
#
#   bash scripts/soak.sh            10 passes
#   SOAK_PASSES=3 bash scripts/soak.sh
#   SOAK_BENCH=0 bash scripts/soak.sh   without the benchmark beside
#   SOAK_KEEP_GOING=1 bash scripts/soak.sh   every pass, also after a failure (to collect flakes)
#
# Stops at the first failing pass unless SOAK_KEEP_GOING=1. Each pass's output is kept in .cache/soak-<time>/pass-<n>.log,
# the benchmark's in bench.log; the summary (one line a pass: status, seconds, passing/failing
# counts) is printed at the end and written to summary.txt. The clone lives in a temp folder and
# is removed at the end; the benchmark writes its results there, never into bench/.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PASSES=${SOAK_PASSES:-10}
BENCH=${SOAK_BENCH:-1}
KEEP_GOING=${SOAK_KEEP_GOING:-0}
OUT="$ROOT/.cache/soak-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/soak.XXXXXX)
BENCH_PID=''
cleanup() {
  if [ -n "$BENCH_PID" ]; then kill -- "-$BENCH_PID" 2>/dev/null || kill "$BENCH_PID" 2>/dev/null; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

git clone -q "$ROOT" "$WORK/repo"
cd "$WORK/repo"
echo "soak: $PASSES passes of npm test on $(git rev-parse --short HEAD)$([ "$BENCH" = 1 ] && echo ', npm run bench beside'); logs in $OUT"
sh scripts/ensure-deps.sh >/dev/null

if [ "$BENCH" = 1 ]; then
  # Its own process group, so the whole loop (bench, platform, Solr, wrk) stops with it.
  setsid bash -c 'while true; do BENCH_OUT="$0/bench-out" npm run --silent bench; sleep 5; done' "$WORK" >"$OUT/bench.log" 2>&1 &
  BENCH_PID=$!
fi

status=0
for n in $(seq 1 "$PASSES"); do
  start=$(date +%s)
  npm test </dev/null >"$OUT/pass-$n.log" 2>&1
  code=$?
  secs=$(( $(date +%s) - start ))
  counts=$(grep -Eo '[0-9]+ (passing|failing|pending)' "$OUT/pass-$n.log" | tr '\n' ' ')
  line="pass $n: $([ $code = 0 ] && echo ok || echo "FAILED (exit $code)") in ${secs}s: $counts"
  echo "$line" | tee -a "$OUT/summary.txt"
  if [ $code != 0 ]; then
    status=1
    grep -E '^\s+[0-9]+\) ' "$OUT/pass-$n.log" | sed "s/^/  pass $n: /" | tee -a "$OUT/summary.txt"
    [ "$KEEP_GOING" = 1 ] || break
  fi
done
[ "$BENCH" = 1 ] && echo "benchmark runs finished beside: $(grep -c '^wrote ' "$OUT/bench.log")" | tee -a "$OUT/summary.txt"
exit $status

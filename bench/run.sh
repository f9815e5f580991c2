#!/usr/bin/env bash
# npm run bench: the workloads of the performance budget (ARCHITECTURE.md), one after the other,
# each starting and stopping what it needs (Redis, the platform, Solr):
#   1. versioned read and create with wrk in its own process (bench/wrk-quick.sh)
#   2. file upload and download, 1 MB and 100 MB (bench/files.ts)
#   3. a full re-index of REINDEX_N contents (default 50,000) into Solr (bench/reindex-rate.ts)
#   4. taxonomy completion, when bench/taxonomy-completion.ts exists
# Output goes to the terminal and to .cache/bench-<time>.log; the figures of a run are copied
# into bench/RESULTS.md by hand with the command that made them. Never part of npm test or CI.
set -euo pipefail
cd "$(dirname "$0")/.."
sh scripts/ensure-deps.sh
if ! command -v wrk >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench: installing wrk (apt-get)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
  else
    echo "bench: wrk is missing (apt-get install wrk)" >&2; exit 2
  fi
fi
mkdir -p .cache
LOG=".cache/bench-$(date +%Y%m%d-%H%M%S).log"
{
  echo "== npm run bench, $(date -u +%FT%TZ), $(nproc) cores, node $(node --version)"
  echo; echo "== 1. versioned read and create (wrk)"
  DURATION=${DURATION:-10s} bash bench/wrk-quick.sh
  echo; echo "== 2. files"
  node --import tsx bench/files.ts "${FILES_SECONDS:-10}"
  echo; echo "== 3. full re-index"
  node --import tsx bench/reindex-rate.ts "${REINDEX_N:-50000}" 2>&1 | grep -v '"level"'
  if [ -f bench/taxonomy-completion.ts ]; then
    echo; echo "== 4. taxonomy completion"
    node --import tsx bench/taxonomy-completion.ts
  fi
} 2>&1 | tee "$LOG"
echo "log: $LOG"

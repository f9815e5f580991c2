#!/bin/sh
# npm start: install what is missing, build, run every role in one process.
set -e
cd "$(dirname "$0")/.."
sh scripts/ensure-deps.sh
npx tsc -p tsconfig.json
exec node dist/src/main.js "$@"

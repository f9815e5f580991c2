#!/bin/sh
# npm start: install what is missing, build, run every role in one process.
# With FLEET=1 (npm run fleet): the roles as separate processes (src/fleet.ts), arguments such
# as `--web 2 --actors 2` passed on.
set -e
cd "$(dirname "$0")/.."
sh scripts/ensure-deps.sh
npx tsc -p tsconfig.json
if [ "$FLEET" = 1 ]; then exec node dist/src/fleet.js "$@"; fi
# The platform's V8 flags: NODE_FLAGS in src/main.ts says why (the Procfile has the same).
exec node --max-semi-space-size=64 dist/src/main.js "$@"

#!/bin/sh
# npm test: install what is missing, type-check, run the mocha suite.
# Redis for the tests is started by test/support/global-setup.ts (one private server per run).
# `npm test -- path/to/file.test.ts ...` runs only those files: mocha otherwise adds the
# `spec` globs of .mocharc.json to any file named on the command line.
set -e
cd "$(dirname "$0")/.."
sh scripts/ensure-deps.sh

# A real nginx in front of the gateway for test/renditions/nginx-cache.test.ts (skipped without
# one). Best effort: the suite runs without it.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "npm test: installing nginx (apt-get) for the cache test" >&2
  { sh scripts/apt-install.sh nginx-light 2>/dev/null || sh scripts/apt-install.sh nginx; } \
    || echo "npm test: nginx could not be installed; the nginx cache test will be skipped" >&2
fi
# Debian's chromium for the console's browser tests (test/console; skipped without one). Best
# effort, like nginx: the browser comes from Debian, never from a download by puppeteer.
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ] && [ -z "$CHROMIUM_PATH" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "npm test: installing chromium (apt-get) for the console tests" >&2
  sh scripts/apt-install.sh chromium \
    || echo "npm test: chromium could not be installed; the console tests will be skipped" >&2
fi
npx tsc -p tsconfig.json --noEmit

# The whole suite also checks format, lint and layering (npm run lint: Biome, dependency-cruiser);
# a run of named files skips it, so a file can be tried while others are mid-edit.
has_files=
for arg in "$@"; do
  case "$arg" in -*) ;; *) [ -e "$arg" ] && has_files=1 ;; esac
done
if [ -z "$has_files" ]; then
  npm run --silent lint || { echo "npm test: format, lint or layering failed (npx biome check --write . mends the format)" >&2; exit 1; }
fi

for arg in "$@"; do
  case "$arg" in
    -*) ;;
    *)
      if [ -e "$arg" ]; then
        mkdir -p .cache
        node -e '
          const fs = require("fs");
          const rc = JSON.parse(fs.readFileSync(".mocharc.json", "utf8"));
          delete rc.spec;
          fs.writeFileSync(".cache/mocharc-files.json", JSON.stringify(rc, null, 2));
        '
        exec npx mocha --config .cache/mocharc-files.json "$@"
      fi
      ;;
  esac
done
exec npx mocha "$@"

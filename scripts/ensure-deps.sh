#!/bin/sh
# Installs what `npm start` and `npm test` need on a fresh machine:
# npm packages (when missing or out of date) and redis-server (apt-get, as root).
set -e
cd "$(dirname "$0")/.."

stamp=node_modules/.package-lock.json
need_install=
if [ ! -d node_modules ] || [ ! -f "$stamp" ]; then
  need_install=1
elif [ -n "$(find package.json package-lock.json -newer "$stamp" 2>/dev/null)" ]; then
  need_install=1
fi
if [ -n "$need_install" ]; then
  echo "ensure-deps: npm install" >&2
  # Not `npm ci`: the lockfile lacks msgpackr-extract's other-platform prebuilds (STACK-NOTES).
  npm install --no-audit --no-fund --loglevel=error
  # npm leaves the stamp alone when nothing changed; touch it so the next run skips this.
  touch "$stamp"
fi

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure-deps: installing redis-server (apt-get)" >&2
    sh scripts/apt-install.sh redis-server
    # Debian starts a system service on 6379 when systemd runs; that is harmless here.
    command -v redis-server >/dev/null 2>&1 || { echo "ensure-deps: redis-server still not on PATH after apt-get install" >&2; exit 1; }
  else
    echo "ensure-deps: redis-server is not installed and this is not root; install it (e.g. sudo apt-get install redis-server) or put it on PATH" >&2
    exit 1
  fi
fi

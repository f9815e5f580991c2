#!/bin/sh
# scripts/apt-install.sh <package>...: apt-get update, then install the packages, quietly.
# Waits for another apt-get or dpkg to let go of its lock (npm test and npm run bench started
# side by side on a fresh machine each install what they miss): up to 10 minutes, then fails.
# Exit 0 when installed; non-zero otherwise (the caller decides whether that is fatal).
i=0
while :; do
  if apt-get -o DPkg::Lock::Timeout=60 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 install -y -qq "$@" >/dev/null; then
    exit 0
  fi
  # A failure while no other apt-get or dpkg runs is not a lock: waiting would not help.
  pgrep -x apt-get >/dev/null 2>&1 || pgrep -x dpkg >/dev/null 2>&1 || pgrep -x apt >/dev/null 2>&1 || exit 1
  i=$((i + 1))
  [ "$i" -ge 60 ] && exit 1
  echo "apt-install: another apt-get holds the lock; waiting to install $*" >&2
  sleep 10
done

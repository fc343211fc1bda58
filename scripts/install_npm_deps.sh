#!/usr/bin/env bash
# Installs the JavaScript test references (tests/package-lock.json) into tests/node_modules;
# installs npm through apt-get when missing. Quiet, and a no-op when node_modules is newer than
# the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../tests"
if ! command -v npm >/dev/null 2>&1; then
  echo "installing: nodejs npm"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq nodejs npm >/dev/null
fi
if [[ -d node_modules && node_modules -nt package-lock.json ]]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null
touch node_modules

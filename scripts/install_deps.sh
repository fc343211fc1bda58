#!/usr/bin/env bash
# Installs the Debian packages Handoff needs, plus any named as arguments (`make fuzz` adds
# clang's); idempotent and silent when all are present.
set -euo pipefail
packages=(cmake g++ make pkg-config libdnnl-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev
  libcpp-httplib-dev libcli11-dev libpcre2-dev libfmt-dev libgtest-dev libgmock-dev
  libbenchmark-dev curl "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0
echo "installing: ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null

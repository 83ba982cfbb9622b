#!/usr/bin/env bash
# Builds and runs sluice-bench-ranked: installs Debian's redis-server and libhiredis-dev when
# missing (for this benchmark only), configures BUILD_DIR (default build-bench) in
# RelWithDebInfo, and passes its arguments on, e.g. --sizes 10000,100000,1000000.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
[[ -f /usr/include/hiredis/hiredis.h ]] || missing+=(libhiredis-dev)
if ((${#missing[@]})); then
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target sluice-bench-ranked -j "${JOBS:-2}"
exec "$build/bench/ranked/sluice-bench-ranked" "$@"

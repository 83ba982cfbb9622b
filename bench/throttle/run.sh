#!/usr/bin/env bash
# Builds and runs sluice-bench-throttle: installs Debian's redis-server and libhiredis-dev
# when missing (for this benchmark only), configures BUILD_DIR (default build-bench) in
# RelWithDebInfo, and passes its arguments on, e.g. --records 1000000 --keys 10000.
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
# A running redis-server service is not needed: the benchmark starts its own on a free port.
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target sluice-bench-throttle -j "${JOBS:-2}"
exec "$build/bench/throttle/sluice-bench-throttle" "$@"

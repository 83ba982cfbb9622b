#!/usr/bin/env bash
# Builds and runs sluice-bench-throttle (bench/redis-bench: installs redis-server and
# libhiredis-dev when missing), passing its arguments on, e.g. --records 1000000 --keys 10000.
exec "$(dirname "$0")/../redis-bench" throttle "$@"

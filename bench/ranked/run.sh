#!/usr/bin/env bash
# Builds and runs sluice-bench-ranked (bench/redis-bench: installs redis-server and
# libhiredis-dev when missing), passing its arguments on, e.g. --sizes 10000,100000,1000000.
exec "$(dirname "$0")/../redis-bench" ranked "$@"

#!/usr/bin/env bash
# Installs sluice from BUILD into a temporary prefix, builds the out-of-tree consumer
# project against it with find_package(sluice), and runs its driver test.
set -euo pipefail
build=$1; source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -G Ninja -S "$source_dir/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" -j2
ctest --test-dir "$work/consumer" --output-on-failure

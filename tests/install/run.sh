#!/usr/bin/env bash
# Installs sluice from BUILD into a temporary prefix, builds the template of a team's own
# project (examples/your-own-project, as docs/your-own-project.md shows it) against it with
# find_package(sluice) under -Wall -Wextra -Werror, and runs its driver tests.
set -euo pipefail
build=$1; source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
template=$source_dir/examples/your-own-project
# The guide shows the template's CMakeLists.txt and its topology in full: they must be the
# files CI builds.
python3 - "$source_dir/docs/your-own-project.md" "$template" <<'PY'
import sys
doc = open(sys.argv[1]).read()
for name, fence in (("CMakeLists.txt", "cmake"), ("shop_topology.hpp", "cpp")):
    text = open(sys.argv[2] + "/" + name).read()
    if "```" + fence + "\n" + text + "```" not in doc:
        sys.exit("docs/your-own-project.md does not show examples/your-own-project/" + name + " as it is")
PY
cp -r "$template" "$work/project"
cmake -G Ninja -S "$work/project" -B "$work/project/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/project/build" -j2
ctest --test-dir "$work/project/build" --output-on-failure

#!/usr/bin/env bash
# check_first_error.sh COMPILER INCLUDE_DIR... -- FILE EXPECTED
# Passes when FILE fails to compile and the FIRST error the compiler prints contains
# EXPECTED: a user who gets a lambda wrong reads what was expected first.
set -u
compiler=$1; shift
includes=()
while [ "$1" != "--" ]; do includes+=("-I$1"); shift; done
shift
file=$1; expected=$2
out=$("$compiler" -std=c++20 -fsyntax-only "${includes[@]}" "$file" 2>&1)
if [ $? -eq 0 ]; then echo "FAIL: $file compiled, but must not"; exit 1; fi
first=$(printf '%s\n' "$out" | grep -m1 'error:')
if printf '%s' "$first" | grep -qF -- "$expected"; then
  echo "ok: $first"
  exit 0
fi
echo "FAIL: first error does not say what was expected"
echo "  expected to contain: $expected"
echo "  first error: $first"
exit 1

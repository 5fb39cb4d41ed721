#!/usr/bin/env bash
# The whole test suite, from a clean clone: installs what is missing, builds the optimized
# (g++) and the sanitizer (clang, ASan + UBSan) configurations, runs the unit and conformance
# tests in both, installs the Python package and runs its tests, then gives each fuzz target a
# short bounded run.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
jobs=$(nproc)

echo "== release build (g++)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

echo "== Python package (pip install ., pytest)"
bash scripts/test_python.sh

echo "== sanitizer build (clang, address + undefined)"
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$jobs"
ctest --preset sanitize -j "$jobs"

echo "== fuzzing (bounded)"
fuzz_seconds=${SIEVE_FUZZ_SECONDS:-30}
shopt -s nullglob
for fuzzer in build/sanitize/fuzz/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer")
  corpus=fuzz/corpus/${name#fuzz_}
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "-- $name for ${fuzz_seconds}s"
  "$fuzzer" -max_total_time="$fuzz_seconds" -max_len=65536 -rss_limit_mb=4096 "$work" 2>&1 | tail -n 3
  rm -rf "$work"
done
echo "== all tests passed"

#!/usr/bin/env bash
# The Python package's tests: `pip install .` (the README's command) into the cached environment of
# python/requirements-test.txt, then pytest on python/tests, run from outside the source tree so
# that `import sieve` is the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
env=$(bash scripts/python_env.sh python/requirements-test.txt)
echo "-- pip install . (into $env)"
"$env/bin/pip" install --quiet --progress-bar off .
repo=$PWD
cd "$(mktemp -d)"
"$env/bin/python" -m pytest -q "$repo/python/tests"

#!/usr/bin/env bash
# The Python package's tests: `pip install .` (the README's command) into the cached environment of
# python/requirements-*.txt, then pytest on python/tests, run from outside the source tree so that
# `import sieve` is the installed package. Then the vLLM plugin: `pip install python/vllm_plugin`
# and its end-to-end tests (vLLM's generate against transformers' on the bundled checkpoints).
set -euo pipefail
cd "$(dirname "$0")/.."
env=$(bash scripts/python_env.sh python/requirements-test.txt --no-deps python/requirements-vllm.txt)
echo "-- pip install . (into $env)"
"$env/bin/pip" install --quiet --progress-bar off .
repo=$PWD
cd "$(mktemp -d)"
"$env/bin/python" -m pytest -q "$repo/python/tests"
echo "-- pip install python/vllm_plugin"
"$env/bin/pip" install --quiet --progress-bar off --no-build-isolation --no-deps "$repo/python/vllm_plugin"
"$env/bin/pip" install --quiet --progress-bar off --no-build-isolation --no-deps "$repo/tools/bench/vllm"; rm -rf "$repo/tools/bench/vllm/build"  # vLLM's own deepseek_v4 attention, for test_deepseek_v4_vllm_own.py
"$env/bin/python" -m pytest -q "$repo/python/vllm_plugin/tests"

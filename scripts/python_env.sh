#!/usr/bin/env bash
# Prints the path of a Python virtual environment holding the pinned packages of the given
# requirement files (those after --no-deps installed without their dependencies), creating it on
# first use. Environments are cached by the files' contents under
# ${SIEVE_PYTHON_ENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/sieve/python-envs}: an unchanged pin list reuses
# one (torch alone is a few GB to download). Needs python3 with venv (scripts/install_deps.sh).
#   scripts/python_env.sh python/requirements-test.txt --no-deps python/requirements-vllm.txt
set -euo pipefail
cd "$(dirname "$0")/.."
files=()
nodeps_files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-deps) nodeps_files+=("${2:?--no-deps needs a requirements file}"); shift 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
if [ ${#files[@]} -eq 0 ]; then
  echo "usage: scripts/python_env.sh <requirements.txt>... [--no-deps <requirements.txt>]..." >&2
  exit 2
fi
python=${SIEVE_PYTHON:-python3}
key=$( { "$python" --version 2>&1; cat "${files[@]}"; echo --no-deps; cat "${nodeps_files[@]}"; } | sha256sum | cut -c1-16)
root=${SIEVE_PYTHON_ENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/sieve/python-envs}
env=$root/$key
if [ ! -f "$env/.complete" ]; then
  echo "creating the Python environment $env (${files[*]} ${nodeps_files[*]})" >&2
  rm -rf "$env"
  mkdir -p "$root"
  "$python" -m venv "$env"
  "$env/bin/pip" install --quiet --upgrade pip >&2
  for r in "${files[@]}"; do
    "$env/bin/pip" install --quiet --progress-bar off -r "$r" >&2
  done
  for r in "${nodeps_files[@]}"; do
    "$env/bin/pip" install --quiet --progress-bar off --no-deps -r "$r" >&2
  done
  touch "$env/.complete"
fi
echo "$env"

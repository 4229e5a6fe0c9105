#!/usr/bin/env bash
# The main job, from a fresh clone on Debian 12 (run as root so that missing
# packages can be installed):
#
#   scripts/demo.sh [demo options]
#
# Installs the build dependencies that are missing (apt-get), builds dlmctl
# (Release, into build/) and runs `dlmctl demo` on the embedded SQLite
# default: the file build/dlm.sqlite. Extra arguments go to the demo, e.g.
#   scripts/demo.sh --workers 8 --seconds 10
#   scripts/demo.sh --db postgresql://user@host/db     (PostgreSQL instead)
# DLM_DATABASE_URL, when set, names the database as it does for dlmctl.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev googletest libgtest-dev)

# Installs the packages of "$@" that dpkg does not list as installed.
install_missing() {
  local p missing=()
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" == installed ]] ||
      missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "demo.sh: missing packages: ${missing[*]} (run as root to install them)" >&2
    return 1
  fi
  echo "demo.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_missing "${packages[@]}"

# Only dlmctl and the library: the tests are scripts/test.sh's business.
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DDLM_BUILD_TESTS=OFF
cmake --build "$root/build" -j"$(nproc)" --target dlmctl

# From build/, dlmctl's default database (./dlm.sqlite) is build/dlm.sqlite.
cd "$root/build"
exec ./dlmctl demo "$@"

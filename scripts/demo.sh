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
# DLM_DATABASE_URL, when set, names the database as it does for dlmctl; so
# do PGHOST, PGDATABASE or PGSERVICE (PostgreSQL) when it is not.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev googletest libgtest-dev)

# shellcheck source=scripts/install-missing.sh
source "$root/scripts/install-missing.sh"

install_missing "${packages[@]}"

# Only dlmctl and the library: the tests are scripts/test.sh's business.
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DDLM_BUILD_TESTS=OFF
cmake --build "$root/build" -j"$(nproc)" --target dlmctl

# From build/, dlmctl's default database (./dlm.sqlite) is build/dlm.sqlite.
cd "$root/build"
exec ./dlmctl demo "$@"

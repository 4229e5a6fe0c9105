#!/usr/bin/env bash
# Builds dlm's Debian packages on Debian 12 (run as root so that missing
# build dependencies can be installed):
#
#   scripts/package.sh [BUILD_DIR]
#
# A Release build of the shared library and dlmctl for /usr in BUILD_DIR
# (default build/package), then CPack: libdlm1, libdlm-dev, dlmctl and
# dlm-schema in BUILD_DIR/packages. Install them with
#   apt-get install ./build/package/packages/*.deb
# (docs/packaging.md). scripts/test.sh checks packages made the same way
# with scripts/check-packages.sh.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build/package}
readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev
  dpkg-dev file)

# shellcheck source=scripts/install-missing.sh
source "$root/scripts/install-missing.sh"
install_missing "${packages[@]}"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_SHARED_LIBS=ON -DDLM_BUILD_TESTS=OFF
cmake --build "$build" -j"$(nproc)"
(cd "$build" && cpack -G DEB)
ls -1 "$build/packages"/*.deb

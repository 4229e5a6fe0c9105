#!/usr/bin/env bash
# Builds dlm's Debian packages on Debian 12 (run as root so that missing
# build dependencies can be installed):
#
#   scripts/package.sh [--output DIR] [BUILD_DIR]
#
# BUILD_DIR (default build/package) is reused when it is configured
# already: a build for /usr with a shared libdlm, such as scripts/test.sh's
# build/ci (`scripts/package.sh build/ci`), or build/package from an
# earlier run. Only the packaged targets, libdlm and dlmctl, are brought up
# to date there; nothing is reconfigured. A BUILD_DIR configured for
# another prefix or a static library is refused. A BUILD_DIR that does not
# exist yet gets a Release build for /usr without the tests and examples.
# Then CPack makes libdlm1, libdlm-dev, dlmctl and dlm-schema in DIR
# (default BUILD_DIR/packages) and the script lists each with what it
# depends on. Install them with
#   apt-get install ./build/package/packages/*.deb
# (docs/packaging.md). scripts/check-packages.sh runs this script on
# scripts/test.sh's build and checks the packages.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
output=""
build=""
while (($# > 0)); do
  case $1 in
    --output) output=${2:?--output needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "package.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
    *) [[ -z $build ]] || { echo "package.sh: one BUILD_DIR only" >&2; exit 2; }
       build=$1; shift ;;
  esac
done
build=${build:-$root/build/package}
readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev
  dpkg-dev file)

# shellcheck source=scripts/install-missing.sh
source "$root/scripts/install-missing.sh"
install_missing "${packages[@]}"

# cached NAME: the value of NAME in BUILD_DIR's CMakeCache.txt.
cached() {
  sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"
}
if [[ -f $build/CMakeCache.txt ]]; then
  prefix=$(cached CMAKE_INSTALL_PREFIX)
  shared=$(cached BUILD_SHARED_LIBS)
  sanitize=$(cached DLM_SANITIZE)
  if [[ $prefix != /usr || ! $shared =~ ^(ON|on|1|TRUE|true|YES|yes)$ || -n $sanitize ]]; then
    echo "package.sh: $build is configured with CMAKE_INSTALL_PREFIX=$prefix," \
      "BUILD_SHARED_LIBS=$shared, DLM_SANITIZE=$sanitize; the packages need /usr," \
      "a shared libdlm and no sanitizer: name another BUILD_DIR" >&2
    exit 1
  fi
  echo "package.sh: reusing the build in $build"
else
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=/usr -DBUILD_SHARED_LIBS=ON -DDLM_BUILD_TESTS=OFF \
    -DDLM_BUILD_EXAMPLES=OFF
fi
# What the packages contain; CPack itself builds nothing.
cmake --build "$build" -j"$(nproc)" --target dlm dlmctl

output=${output:-$build/packages}
mkdir -p "$output"
output=$(cd "$output" && pwd)
# CMake's CPackDeb.cmake prints "CPACK_DEBIAN_PACKAGE_DEPENDS not set, the
# package will have no dependencies." for dlm-schema, which indeed has
# none (SQL files only), without naming the package, so it reads as if it
# were said of all four. Left out; the list below says what each depends on.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
(cd "$build" && cpack -G DEB -B "$output") >"$log" 2>&1 || status=$?
grep -v 'the package will have no dependencies\.$' "$log" || true
((status == 0)) || { echo "package.sh: cpack failed" >&2; exit "$status"; }
mapfile -t debs < <(sed -n 's/^CPack: - package: \(.*\) generated\.$/\1/p' "$log")
((${#debs[@]} > 0)) || { echo "package.sh: cpack named no package" >&2; exit 1; }
for deb in "${debs[@]}"; do
  depends=$(dpkg-deb -f "$deb" Depends)
  printf '%s\n  depends: %s\n' "$deb" "${depends:-nothing}"
done

#!/usr/bin/env bash
# The Debian packages as a user gets them (docs/packaging.md):
#
#   scripts/check-packages.sh BUILD_DIR
#
# BUILD_DIR is a build with a shared libdlm and -DCMAKE_INSTALL_PREFIX=/usr
# (scripts/test.sh's build/ci). The script
# 1. builds the four packages there with CPack (libdlm1, libdlm-dev, dlmctl,
#    dlm-schema) and shows what each depends on;
# 2. installs them on this machine with apt;
# 3. builds and runs two programs against the installed files only, from a
#    copy of tests/install/consumer outside the source tree: one with
#    pkg-config, one with CMake (find_package(dlm 1.0), with the packages of
#    dlm's own dependencies made unfindable: a shared libdlm needs none of
#    them); checks that the program includes no header of a dependency;
# 4. runs `dlmctl --version` and finds its manual page;
# 5. applies the packaged PostgreSQL schema with psql to a fresh database of
#    the server the PG* variables name (scripts/test.sh's cluster), in a
#    schema of its own, and has dlmctl check it;
# 6. removes the packages again (also when a step fails) and checks that
#    none of their files is left.
# Root only (apt); refuses to run when a dlm package is already installed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly packages=(libdlm1 libdlm-dev dlmctl dlm-schema)
build=${1:?usage: check-packages.sh BUILD_DIR}
build=$(cd "$build" && pwd)

die() {
  echo "check-packages: $*" >&2
  exit 1
}

((EUID == 0)) || die "run as root (apt installs the packages)"
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok'; then
    die "$p is installed already; remove it first"
  fi
done

work=$(mktemp -d /tmp/dlm-packages.XXXXXX)
installed=0
database=""
cleanup() {
  local rc=$?
  if [[ -n $database ]]; then
    dropdb --if-exists "$database" >/dev/null 2>&1 || true
  fi
  if ((installed)); then
    if ! apt-get remove -y --purge "${packages[@]}" >"$work/remove.log" 2>&1; then
      cat "$work/remove.log" >&2
      echo "check-packages: removing the packages failed" >&2
      rc=1
    fi
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT

echo "== 1. cpack -G DEB in $build"
(cd "$build" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; die "cpack failed"; }
debs=()
for p in "${packages[@]}"; do
  deb=$(ls "$work/debs/${p}_"*.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || die "no package $p among: $(ls "$work/debs")"
  debs+=("$deb")
  printf '%-11s %-7s depends: %s\n' "$p" "$(dpkg-deb -f "$deb" Version)" \
    "$(dpkg-deb -f "$deb" Depends)"
done
dev_depends=$(dpkg-deb -f "$work/debs/libdlm-dev_"*.deb Depends)
[[ $dev_depends == "libdlm1 (= "* && $dev_depends != *-dev* ]] ||
  die "libdlm-dev must depend on libdlm1 alone, not on dev packages: $dev_depends"

echo "== 2. apt-get install"
installed=1
apt-get install -y --no-install-recommends "${debs[@]}" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; die "apt-get install failed"; }
readelf -d /usr/lib/*/libdlm.so.1 | grep -q 'SONAME.*\[libdlm.so.1\]' ||
  die "the installed library's SONAME is not libdlm.so.1"

echo "== 3. consumers, from a copy outside the source tree"
cp -r "$root/tests/install/consumer" "$work/consumer"
cd "$work/consumer"
# pkg-config
read -r -a pc_flags <<<"$(pkg-config --cflags --libs dlm)"
echo "pkg-config --cflags --libs dlm: ${pc_flags[*]}"
g++ -std=c++17 -Wall -Werror main.cpp "${pc_flags[@]}" -o "$work/pc-consumer"
"$work/pc-consumer" "$work/pc.sqlite"
# Only dlm's own headers and the standard library's: no dev package of a
# dependency is needed to compile against dlm.
g++ -std=c++17 -MM -MG main.cpp $(pkg-config --cflags dlm) >"$work/deps.txt"
if grep -E 'pqxx|fmt/|sqlite3\.h|libpq-fe|openssl' "$work/deps.txt"; then
  die "the public headers include a dependency's headers (above)"
fi
ldd "$work/pc-consumer" | grep -Eq 'libdlm\.so\.1 => /(usr/)?lib/' ||
  die "the pkg-config consumer does not load the installed libdlm.so.1"
# CMake, with dlm's dependencies unfindable.
cmake -S . -B "$work/cmake-build" -DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_Threads=ON >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; die "the CMake consumer did not configure"; }
grep 'dlm 1\.' "$work/cmake.log"
cmake --build "$work/cmake-build" >"$work/cmake-build.log" 2>&1 ||
  { cat "$work/cmake-build.log" >&2; die "the CMake consumer did not build"; }
"$work/cmake-build/consumer" "$work/cmake.sqlite"
cd /

echo "== 4. dlmctl"
dlmctl --version
man -w dlmctl

echo "== 5. the packaged schema, applied with psql"
database="dlm_packages_$$"
createdb "$database"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c 'CREATE SCHEMA dlm'
PGOPTIONS='-c search_path=dlm' psql -X -q -v ON_ERROR_STOP=1 -1 \
  -d "$database" -f /usr/share/dlm/schema/postgres.sql
dlmctl --db "postgresql:///$database" --schema dlm schema status
ls /usr/share/dlm/migrations/postgres/V1__*.sql /usr/share/dlm/schema/sqlite.sql >/dev/null

echo "== 6. apt-get remove"
installed=0
apt-get remove -y --purge "${packages[@]}" >"$work/remove.log" 2>&1 ||
  { cat "$work/remove.log" >&2; die "apt-get remove failed"; }
for f in /usr/include/dlm /usr/share/dlm /usr/bin/dlmctl /usr/lib/*/libdlm.so.1 \
  /usr/lib/*/pkgconfig/dlm.pc /usr/lib/*/cmake/dlm; do
  [[ ! -e $f ]] || die "$f is left after the packages were removed"
done
echo "check-packages: PASS"

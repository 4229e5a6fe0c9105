#!/usr/bin/env bash
# The Debian packages as a user gets them (docs/packaging.md):
#
#   scripts/check-packages.sh BUILD_DIR
#
# BUILD_DIR is a build with a shared libdlm and -DCMAKE_INSTALL_PREFIX=/usr
# (scripts/test.sh's build/ci). The script
# 1. builds the four packages (libdlm1, libdlm-dev, dlmctl, dlm-schema)
#    with scripts/package.sh, reusing BUILD_DIR as it is (its CMakeCache.txt
#    must not change), which lists what each depends on and must not say
#    that a package has no dependencies; checks that each package has a
#    Description of its own (dpkg-deb: a synopsis no other package has,
#    then lines of one leading space);
# 2. installs them on this machine with apt; the installed dlmctl carries no
#    run path and dlm.pc says prefix=/usr;
# 3. builds and runs two programs against the installed files only, from a
#    copy of tests/install/consumer outside the source tree: one with
#    pkg-config, one with CMake (find_package(dlm 1.0), with the packages of
#    dlm's own dependencies made unfindable: a shared libdlm needs none of
#    them); checks that the program includes no header of a dependency;
#    builds examples/commit_lock.cpp with examples/README.md's line
#    (pkg-config dlm-postgres dlm-sqlite) and runs it on SQLite;
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

echo "== 1. scripts/package.sh $build"
cache_before=$(sha256sum <"$build/CMakeCache.txt")
"$root/scripts/package.sh" --output "$work/debs" "$build" >"$work/package.log" 2>&1 ||
  { cat "$work/package.log" >&2; die "scripts/package.sh failed"; }
cat "$work/package.log"
[[ $(sha256sum <"$build/CMakeCache.txt") == "$cache_before" ]] ||
  die "scripts/package.sh reconfigured $build instead of reusing it"
if grep -n 'no dependencies' "$work/package.log"; then
  die "scripts/package.sh says a package has no dependencies (above)"
fi
debs=()
synopses=()
for p in "${packages[@]}"; do
  deb=$(ls "$work/debs/${p}_"*.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || die "no package $p among: $(ls "$work/debs")"
  debs+=("$deb")
  grep -q "^$deb\$" "$work/package.log" || die "scripts/package.sh did not list $p"
  # Its own Description: a synopsis of its own, then the long description,
  # each line starting with exactly one space (two: shown verbatim).
  description=$(dpkg-deb -f "$deb" Description)
  synopsis=$(head -n 1 <<<"$description")
  printf '%-11s %s\n' "$p" "$synopsis"
  for other in "${synopses[@]}"; do
    [[ $synopsis != "$other" ]] || die "$p has the synopsis of another package: $synopsis"
  done
  synopses+=("$synopsis")
  body=$(tail -n +2 <<<"$description")
  [[ -n $body ]] || die "$p has no long description"
  if grep -vn '^ [^ ]' <<<"$body"; then
    die "$p: the lines of its long description above do not start with one space"
  fi
done
dev_depends=$(dpkg-deb -f "$work/debs/libdlm-dev_"*.deb Depends)
[[ $dev_depends == "libdlm1 (= "* && $dev_depends != *-dev* ]] ||
  die "libdlm-dev must depend on libdlm1 alone, not on dev packages: $dev_depends"

echo "== 2. apt-get install"
installed=1
apt-get install -y --no-install-recommends "${debs[@]}" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; die "apt-get install failed"; }
# grep without -q in a pipeline: one that quits at the first match can
# leave the writer to die of SIGPIPE, and pipefail fails the check.
readelf -d /usr/lib/*/libdlm.so.1 | grep 'SONAME.*\[libdlm.so.1\]' >/dev/null ||
  die "the installed library's SONAME is not libdlm.so.1"
# A prefix install's dlmctl finds libdlm through $ORIGIN/../<libdir>; the
# packaged one, under /usr, through the system's search path alone.
if readelf -d /usr/bin/dlmctl | grep -E 'R(UN)?PATH'; then
  die "the packaged /usr/bin/dlmctl carries a run path (above)"
fi
[[ $(pkg-config --variable=prefix dlm) == /usr ]] ||
  die "the packaged dlm.pc says prefix=$(pkg-config --variable=prefix dlm), not /usr"

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
ldd "$work/pc-consumer" | grep -E 'libdlm\.so\.1 => /(usr/)?lib/' >/dev/null ||
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
# An example that opens its own SQLite and libpqxx transactions, built with
# examples/README.md's line for it (pkg-config dlm-postgres dlm-sqlite).
mkdir "$work/examples"
cp "$root/examples/commit_lock.cpp" "$root/examples/app_db.h" "$work/examples/"
cd "$work/examples"
line=$(awk '/^<!-- build -->$/ { mark = 1; next } mark && /^```$/ && seen { exit }
            mark && /^```sh$/ { seen = 1; next } seen && / -o commit_lock / { print }' \
  "$root/examples/README.md")
[[ -n $line ]] || die "examples/README.md has no build line for commit_lock"
echo "$line"
bash -euo pipefail -c "$line" || die "commit_lock did not build as examples/README.md says"
./commit_lock "sqlite:$work/commit_lock.sqlite" >"$work/commit_lock.log" ||
  { cat "$work/commit_lock.log" >&2; die "commit_lock failed"; }
tail -n 1 "$work/commit_lock.log"
cd /

echo "== 4. dlmctl"
dlmctl --version
man -w dlmctl

echo "== 5. the packaged schema, applied with psql"
database="dlm_packages_$$"
createdb "$database"
psql -X -q -v ON_ERROR_STOP=1 -d "$database" -c 'CREATE SCHEMA dlm'
PGOPTIONS='-c search_path=dlm -c dlm.client_role=dlm_client -c dlm.admin_role=dlm_admin' \
  psql -X -q -v ON_ERROR_STOP=1 -1 \
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

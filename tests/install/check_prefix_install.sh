#!/usr/bin/env bash
# An install under a prefix of its own, used as docs/packaging.md and
# examples/README.md say:
#
#   check_prefix_install.sh SOURCE_DIR BUILD_DIR
#
# 1. `cmake --install BUILD_DIR --prefix <temporary directory>`; the
#    installed dlmctl runs with no LD_LIBRARY_PATH (its run path,
#    $ORIGIN/../<libdir>), and the installed dlm.pc names that prefix, not
#    the one BUILD_DIR was configured with;
# 2. examples/README.md's shell blocks as written, in a copy of examples/
#    outside the source tree: <!-- prefix --> with its dlm_prefix= and
#    dlm_libdir= lines pointing at that install, then <!-- build --> (every
#    example, built with pkg-config only: dlm, dlm-postgres, dlm-sqlite),
#    <!-- run --> (SQLite) and <!-- run postgres --> (its PG* line left
#    out: the test's own PG* variables name the server; the schema
#    dlm_examples renamed to one of this run, dropped afterwards).
# BUILD_DIR is a build with a shared libdlm (scripts/test.sh's build/ci).
# Fails without the PostgreSQL server of the PG* variables.
set -euo pipefail
root=$1
build=$2
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -n ${PGHOST:-} ]] ||
  fail "PGHOST is not set: this test needs the PG* variables of scripts/test.sh's server"
work=$(mktemp -d)
schema="dlm_examples_$$_$RANDOM"
cleanup() {
  psql -X -q -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
prefix=$work/prefix

echo "== 1. cmake --install --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install failed"; }
dlmctl=$prefix/bin/dlmctl
readelf -d "$dlmctl" | grep -E 'R(UN)?PATH' || true
env -u LD_LIBRARY_PATH "$dlmctl" --version ||
  fail "$dlmctl --version failed (exit $?): it does not find the libdlm.so.1 installed beside it"
pc=$(find "$prefix" -name dlm.pc)
[[ -n $pc ]] || fail "no dlm.pc under $prefix"
pc_prefix=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=prefix dlm)
[[ $pc_prefix == "$prefix" ]] ||
  fail "the installed dlm.pc says prefix=$pc_prefix, not $prefix"
libdir=$(dirname "$(dirname "$pc")")

echo "== 2. examples/README.md in a copy of examples/"
readme=$root/examples/README.md
# block MARKER: the body of the sh block right after the line MARKER.
block() {
  awk -v marker="$1" '$0 == marker { mark = 1; next }
    mark && /^```sh$/ { grab = 1; next } mark && !grab { exit }
    grab && /^```$/ { exit } grab { print }' "$readme"
}
setup=$(block '<!-- prefix -->')
if ! grep -q '^dlm_prefix=' <<<"$setup" || ! grep -q '^dlm_libdir=' <<<"$setup"; then
  fail "the <!-- prefix --> block no longer sets dlm_prefix= and dlm_libdir=: $setup"
fi
setup=$(sed -e "s|^dlm_prefix=.*|dlm_prefix=$prefix|" \
  -e "s|^dlm_libdir=.*|dlm_libdir=$libdir|" <<<"$setup")
build_step=$(block '<!-- build -->')
run_step=$(block '<!-- run -->')
run_postgres=$(block '<!-- run postgres -->')
[[ -n $build_step && -n $run_step && -n $run_postgres ]] ||
  fail "examples/README.md lacks the sh block after <!-- build -->, <!-- run --> or <!-- run postgres -->"
grep -q '^export PGHOST=' <<<"$run_postgres" ||
  fail "the <!-- run postgres --> block no longer starts with its PG* line: $run_postgres"
grep -q 'dlm_examples' <<<"$run_postgres" ||
  fail "the <!-- run postgres --> block no longer names the schema dlm_examples"
run_postgres=$(sed -e '/^export PGHOST=/d' -e "s/dlm_examples/$schema/g" <<<"$run_postgres")

# Every example the README builds is in examples/, and the other way round.
built=$(grep -o '^c++ .* -o [a-z_]*' <<<"$build_step" | sed 's/.* -o //' | sort)
sources=$(cd "$root/examples" && ls -- *.cpp | sed 's/\.cpp$//' | sort)
[[ $built == "$sources" ]] ||
  fail "examples/README.md builds [$(tr '\n' ' ' <<<"$built")], examples/ has [$(tr '\n' ' ' <<<"$sources")]"

mkdir "$work/examples"
cp "$root"/examples/*.cpp "$root"/examples/*.h "$work/examples/"
cd "$work/examples"
# One shell, as a reader types the blocks one after another; without the
# caller's LD_LIBRARY_PATH and PKG_CONFIG_PATH: only the README's own
# setup points at the install.
env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH bash -euo pipefail -c "
$setup
echo '-- build'
set -x
$build_step
set +x
echo '-- run (SQLite)'
$run_step
echo '-- run (PostgreSQL)'
$run_postgres
" >"$work/readme.log" 2>&1 || {
  cat "$work/readme.log" >&2
  fail "examples/README.md's blocks failed as written (above)"
}
cat "$work/readme.log"
# The three copies of one_node_job at once: each ran the job or skipped it,
# and at least one ran it (exactly one unless a copy started after the
# first one's 1-second job, which a busy machine may do).
ran=$(grep -c ': running the import' "$work/readme.log" || true)
skipped=$(grep -c ': skipped: ' "$work/readme.log" || true)
((ran >= 1 && ran + skipped == 3)) ||
  fail "one_node_job: $ran of three copies ran the job, $skipped skipped it"
echo "prefix install: dlmctl runs, dlm.pc names $prefix, the README built and ran every example"

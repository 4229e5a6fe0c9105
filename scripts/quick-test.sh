#!/usr/bin/env bash
# The quick loop, for a change in progress (no database server, no
# sanitizers; the build dependencies must be there):
#
#   scripts/quick-test.sh [BUILD_DIR] [ctest options...]
#
# builds what the quick tests need in BUILD_DIR (default build/ci, the plain
# build of scripts/test.sh, so a run of either warms the other; ccache is used
# when installed) and runs the ctest tests labelled "quick", several at a
# time: the unit tests, the conformance suite on SQLite and dlmctl's tests on
# SQLite (cli_*, without the _postgres twins). Under a minute on 2 cores once
# the build is warm. Extra arguments go to ctest (e.g. -R cli_ or -V).
# scripts/test.sh runs everything.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build/ci
if (($# > 0)) && [[ $1 != -* ]]; then
  build=$1
  shift
fi
jobs=$(nproc 2>/dev/null || echo 2)
started=$SECONDS

# The same configuration as scripts/test.sh's plain build (Ninja when
# installed, each test program one unity translation unit).
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake "${generator[@]}" -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DDLM_WERROR=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" \
    "-DDLM_UNITY_BUILD=${DLM_UNITY_BUILD:-TESTS}" "${launcher[@]}" || exit 1
fi
cmake --build "$build" -j"$jobs" --target dlm_unit_tests dlm_conformance_tests \
  dlm_store_contract_tests dlm_command_line_tests dlm_contention_tests dlmctl \
  dlm_prometheus_sample || exit 1

# 4 at a time, as in scripts/test.sh.
ctest --test-dir "$build" -L '^quick$' -j4 --output-on-failure \
  --timeout 300 "$@"
rc=$?
elapsed=$((SECONDS - started))
printf 'quick-test: %s in %d min %02d s\n' "$([[ $rc == 0 ]] && echo PASS || echo FAIL)" \
  $((elapsed / 60)) $((elapsed % 60))
exit $rc

#!/usr/bin/env bash
# The test command, from a fresh clone on Debian 12 (run as root so that
# missing packages can be installed and the throwaway PostgreSQL cluster can
# run as its own system user):
#
#   scripts/test.sh [--no-sanitizers] [--busy]
#
# 1. installs the build dependencies and the PostgreSQL 15 server if missing;
# 2. builds everything with warnings as errors (build/ci);
# 3. starts a throwaway PostgreSQL cluster (scripts/pg-cluster.sh, a temp
#    directory, a free loopback port) and exports its PG* variables, starts
#    a second one for the tests that restart or stop a whole server
#    (DLM_TEST_PG_DIR, tests/support/on_own_cluster.sh), starts PgBouncer
#    in front of the first (scripts/pgbouncer.sh, transaction pooling;
#    DLM_TEST_PGBOUNCER_*), and stops them on exit whatever happens;
# 4. runs every ctest test (SQLite and PostgreSQL), then `dlmctl demo` on
#    both stores, then builds the Debian packages from build/ci, installs
#    them, builds programs against them, applies their schema and removes
#    them (scripts/check-packages.sh); the fault tests among them (tests/faults, label "faults",
#    about a minute) restart the second cluster, terminate its backends and
#    stall it behind a proxy, one at a time, and leave it running; the
#    failover tests (label "ha") among them on a pg_auto_failover formation
#    of their own (scripts/pg-auto-failover.sh; scripts/ha-test.sh runs
#    them alone);
# 5. an address+undefined sanitizer build (build/asan, a static libdlm: the
#    plain build's is shared) runs every test again
#    but, to keep the command short, the fairness runs, the contention runs
#    and the store contract through PgBouncer (conformance_pgbouncer keeps
#    the pooler-safe path under the sanitizer), the mixed-fleet upgrade (it exercises an older
#    library's SQL), dlmctl's signal tests, the PostgreSQL twins of dlmctl's
#    tests and of the examples (their SQLite runs take the same paths through
#    dlmctl and the manager; the store's own code runs in the conformance,
#    store-contract and postgres_store tests), the docs tests, the fault tests (label faults:
#    restarts and stalls, about 40 s) and the failover tests;
# 6. a thread sanitizer build (build/tsan) runs the contention (less the
#    fairness runs), unit and conformance tests (the ones with threads).
# --no-sanitizers stops after step 4 (for a quick local run).
# --busy runs two CPU-bound processes (`sh -c 'while :; do :; done'`, at the
# script's own priority) beside everything, from start to end: the tests
# must pass on a machine that is doing other work, as a CI runner often is.
#
# ctest runs 4 tests at a time (CTEST_PARALLEL_LEVEL overrides; most tests
# wait on sleeps and the server, not the CPU; the cluster allows 200
# connections); the tests marked RUN_SERIAL (the fairness runs: they measure
# shares of the CPU) run alone; those that restart, stall or watch a whole
# server take turns on the second cluster beside the others. ccache is used when installed. scripts/quick-test.sh is the quick
# loop (unit, SQLite conformance, dlmctl on SQLite; no server).
#
# The builds use Ninja (ninja-build) and unity builds (DLM_UNITY_BUILD, every
# target; scripts/quick-test.sh builds the library file by file);
# DLM_UNITY_BUILD=OFF in the environment builds every file on its own.
#
# Prints PASS/FAIL per stage and overall with the elapsed time; exits 1 if
# anything failed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
ctest_jobs=${CTEST_PARALLEL_LEVEL:-4}
sanitizers=1
busy=0
for arg in "$@"; do
  case "$arg" in
    --no-sanitizers) sanitizers=0 ;;
    --busy) busy=1 ;;
    -h | --help) sed -n '2,54p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev libssl-dev googletest libgtest-dev
  postgresql-15 pgbouncer pg-auto-failover-cli postgresql-15-auto-failover
  python3-prometheus-client sqlite3 jq ccache ninja-build dpkg-dev file man-db
  groff-base)

started=$SECONDS
summary=()
failures=0

# stage NAME COMMAND...: runs one step, records PASS/FAIL and its duration.
stage() {
  local name=$1 t=$SECONDS
  shift
  echo
  echo "=== $name"
  if "$@"; then
    summary+=("PASS  $name ($((SECONDS - t)) s)")
    return 0
  fi
  summary+=("FAIL  $name ($((SECONDS - t)) s)")
  failures=$((failures + 1))
  return 1
}

skip() {
  summary+=("SKIP  $1 ($2)")
  failures=$((failures + 1))
}

finish() {
  local elapsed=$((SECONDS - started))
  echo
  echo "=== summary"
  printf '%s\n' "${summary[@]}"
  printf 'elapsed: %d min %02d s\n' $((elapsed / 60)) $((elapsed % 60))
  if ((failures == 0)); then
    echo "RESULT: PASS"
  else
    echo "RESULT: FAIL ($failures stage(s) failed or skipped)"
  fi
}

# shellcheck source=scripts/install-missing.sh
source "$root/scripts/install-missing.sh"

# Unity builds (DLM_UNITY_BUILD, CMakeLists.txt): every target of all three
# builds is compiled as one translation unit; each build takes a sixth to a
# third less time (the plain build: 102 s against 129 s with the library and
# dlmctl file by file, measured 2026-11-27). scripts/quick-test.sh keeps the
# library file by file (TESTS), as users build it, so a source that does not
# compile on its own shows in the inner loop. DLM_UNITY_BUILD=OFF (or TESTS,
# ALL) in the environment sets it for all three builds.
unity_plain=${DLM_UNITY_BUILD:-ALL}
unity_sanitizers=${DLM_UNITY_BUILD:-ALL}

# build DIR [cmake -D options...] -- [targets...]
# RelWithDebInfo unless an option sets CMAKE_BUILD_TYPE (the sanitizer builds
# use Debug: -O0 halves their build time, and their tests are I/O-bound).
build() {
  local dir=$1 opts=() targets=() generator=()
  shift
  while (($# > 0)) && [[ $1 != -- ]]; do opts+=("$1"); shift; done
  (($# > 0)) && shift
  targets=("$@")
  # Without full debug information, which costs a third of the build time:
  # the plain build is optimised (-O1 -DNDEBUG: the optimiser's warnings and
  # code paths, a fifth faster to compile than -O2), the sanitizer builds
  # -O0 with -g1 (line tables: enough for their reports' stack traces).
  # The builds never overlap the tests: a compiler beside them, even at
  # nice 19, made timing-bound tests fail (row-lock waits, wake-up bounds).
  # ccache: a rerun recompiles only what changed.
  command -v ccache >/dev/null && opts=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${opts[@]}")
  # Ninja: it compiles a target's files while the libraries the target
  # links are still being built, where Make waits for them (the unity
  # builds' large units then share the two cores; the thread sanitizer
  # build takes a quarter less). A directory configured before keeps the
  # generator it has.
  if [[ ! -f $dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then
    generator=(-G Ninja)
  fi
  cmake "${generator[@]}" -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLM_WERROR=ON \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_DEBUG=-g1" \
    "${opts[@]}" || return 1
  if ((${#targets[@]} > 0)); then
    cmake --build "$dir" -j"$jobs" --target "${targets[@]}"
  else
    cmake --build "$dir" -j"$jobs"
  fi
}

run_ctest() {
  local dir=$1
  shift
  ctest --test-dir "$dir" --output-on-failure --timeout 900 -j"$ctest_jobs" "$@"
}

# dlmctl demo on a database, briefly: the main job must keep working.
demo_sqlite() {
  local db
  db=$(mktemp -d /tmp/dlm-demo.XXXXXX) || return 1
  "$root/build/ci/dlmctl" --db "sqlite:$db/demo.sqlite" demo --seconds 3
  local rc=$?
  rm -rf "$db"
  return $rc
}

demo_postgres() {
  # The URL names nothing: libpq takes server, user and database from PG*.
  "$root/build/ci/dlmctl" --db postgresql:// demo --seconds 3
}

pg_dir=""
own_dir=""
pgb_dir=""
ha_dir=""
stop_ha() {
  if [[ -n "$ha_dir" ]]; then
    "$root/scripts/pg-auto-failover.sh" stop "$ha_dir" >/dev/null 2>&1 ||
      echo "test.sh: could not stop the formation in $ha_dir" >&2
    ha_dir=""
  fi
}
# When a stage failed, the servers' logs go to build/test-logs/ before the
# clusters are removed: what the server did while a call waited.
keep_server_logs() {
  ((failures > 0)) || return 0
  local logs="$root/build/test-logs" dir
  mkdir -p "$logs"
  for dir in "$pg_dir" "$own_dir"; do
    [[ -n "$dir" && -f "$dir/server.log" ]] &&
      cp "$dir/server.log" "$logs/$(basename "$dir").log"
  done
  echo "test.sh: the PostgreSQL servers' logs are in $logs"
}
stop_pg() {
  keep_server_logs
  stop_ha
  if [[ -n "$pgb_dir" ]]; then
    "$root/scripts/pgbouncer.sh" stop "$pgb_dir" >/dev/null 2>&1 ||
      echo "test.sh: could not stop PgBouncer in $pgb_dir" >&2
    pgb_dir=""
  fi
  local dir
  for dir in "$pg_dir" "$own_dir"; do
    [[ -n "$dir" ]] || continue
    "$root/scripts/pg-cluster.sh" stop "$dir" >/dev/null 2>&1 ||
      echo "test.sh: could not stop the PostgreSQL cluster in $dir" >&2
  done
  pg_dir=""
  own_dir=""
}

# Where the throwaway servers and the tests' temporary files live: a tmpfs
# (/dev/shm) when there is one with room, else /tmp. On this project's 2-core
# VM the disk stalled fsync for 5-30 s at times while the sanitizer builds
# wrote their objects (/proc/pressure/io: 15 % of the time stalled over
# 5 minutes); a SQLite test commit waiting that long held the file's write
# lock past every other test's 30 s budget, and PostgreSQL calls timed out
# with nothing slow on the server. Test data needs no disk; the product's
# own behaviour on a slow disk is bounded by its deadlines either way.
scratch_root() {
  local avail
  if [[ -d /dev/shm && -w /dev/shm ]] &&
    [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]]; then
    avail=$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')
    if ((avail > 2 * 1024 * 1024)); then
      echo /dev/shm
      return
    fi
  fi
  echo /tmp
}
scratch=$(scratch_root)
test_tmp=$(mktemp -d "$scratch/dlm-test-tmp.XXXXXX") || exit 1
chmod 1777 "$test_tmp"
# The tests' own temporary files (SQLite databases, worker logs).
export TMPDIR=$test_tmp

start_pg() {
  # Under /tmp or /dev/shm: the cluster's owner (a system user when we are
  # root) must be able to reach the directory, which a clone under /root
  # would not allow.
  pg_dir=$(mktemp -d "$scratch/dlm-test-pg.XXXXXX") || return 1
  # fsync off: the tests' checkpoints (DROP DATABASE forces one) must not
  # hold every other test's commits behind seconds of fsync on a busy disk
  # (scripts/pg-cluster.sh). A killed or restarted server still keeps all
  # that was written, which is what the fault tests rely on.
  export PG_CLUSTER_FSYNC=off
  "$root/scripts/pg-cluster.sh" start "$pg_dir" || return 1
  # shellcheck disable=SC1091
  . "$pg_dir/env"
  echo "PostgreSQL at $PGHOST:$PGPORT (cluster in $pg_dir)"
  # A second cluster for the tests that restart, stop or watch the whole
  # server (the fault tests, postgres_store_server_wide): they run on it
  # through tests/support/on_own_cluster.sh, one at a time, beside the tests
  # on the first (scripts/pg-cluster.sh restart "$DLM_TEST_PG_DIR" ...).
  own_dir=$(mktemp -d "$scratch/dlm-test-pg-own.XXXXXX") || return 1
  "$root/scripts/pg-cluster.sh" start "$own_dir" >/dev/null || return 1
  export DLM_TEST_PG_DIR=$own_dir
  echo "PostgreSQL for the server-wide tests: cluster in $own_dir"
  # PgBouncer in front of it (transaction pooling), for conformance_pgbouncer.
  pgb_dir=$(mktemp -d "$scratch/dlm-test-pgbouncer.XXXXXX") || return 1
  "$root/scripts/pgbouncer.sh" start "$pgb_dir" "$pg_dir" || return 1
  # shellcheck disable=SC1091
  . "$pgb_dir/env"
  export DLM_TEST_PGBOUNCER_PORT DLM_TEST_PGBOUNCER_AUTH_FILE
  echo "PgBouncer at 127.0.0.1:$DLM_TEST_PGBOUNCER_PORT"
}

# The pg_auto_failover formation of the failover tests (label ha).
start_ha() {
  ha_dir=$(mktemp -d "$scratch/dlm-test-ha.XXXXXX") || return 1
  if ! "$root/scripts/pg-auto-failover.sh" start "$ha_dir" >/dev/null; then
    echo "test.sh: the formation did not start; its logs:" >&2
    tail -n 30 "$ha_dir"/*.log >&2 2>/dev/null
    return 1
  fi
  # shellcheck disable=SC1091
  . "$ha_dir/env"
  export DLM_TEST_HA_URL DLM_TEST_HA_DIR
  echo "pg_auto_failover formation: $DLM_TEST_HA_URL"
}

busy_pids=()
stop_busy() {
  ((${#busy_pids[@]} > 0)) && kill "${busy_pids[@]}" 2>/dev/null
  busy_pids=()
}
start_busy() {
  local i
  for i in 1 2; do
    sh -c 'while :; do :; done' &
    busy_pids+=($!)
  done
  echo "--busy: two CPU-bound processes beside the tests (pids ${busy_pids[*]})"
}

trap 'stop_busy; stop_pg; rm -rf "$test_tmp"' EXIT
trap 'echo "test.sh: interrupted" >&2; exit 130' INT TERM

((busy)) && start_busy

if ! stage "install missing packages" install_missing "${packages[@]}"; then
  finish
  exit 1
fi

stage "PostgreSQL: start a throwaway cluster and PgBouncer" start_pg

# A shared libdlm installed under /usr: the build the packages are made of.
if stage "build (warnings as errors) -> build/ci" build "$root/build/ci" \
  "-DDLM_UNITY_BUILD=$unity_plain" -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_INSTALL_PREFIX=/usr; then
  # The failover tests run beside the others, on servers of their own.
  if stage "pg_auto_failover: start a throwaway formation" start_ha; then
    stage "ctest (all tests: SQLite, PostgreSQL, failover)" \
      run_ctest "$root/build/ci"
    stop_ha
    # The formation's three servers wrote their shutdown checkpoints: flush
    # them now, not during the next stage's commits (a demo on PostgreSQL
    # once waited more than 5 s for its server right after this).
    sync
  else
    stage "ctest (all tests but failover)" run_ctest "$root/build/ci" -LE '^ha$'
  fi
  stage "dlmctl demo on SQLite" demo_sqlite
  stage "dlmctl demo on PostgreSQL" demo_postgres
  stage "Debian packages: build, install, use, remove" \
    "$root/scripts/check-packages.sh" "$root/build/ci"
else
  skip "ctest (all tests)" "build failed"
fi

if ((sanitizers)); then
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # Sanitizer builds leave out what they do not run (fault, failover and
  # upgrade tests, dlm_fairness, the busy-wait bench: EXCLUDE_FROM_ALL).
  if stage "build with address+undefined sanitizers -> build/asan" \
    build "$root/build/asan" -DDLM_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug \
    "-DDLM_UNITY_BUILD=$unity_sanitizers" -DBUILD_SHARED_LIBS=OFF; then
    # Less the fairness runs: they measure shares of holds (run above and
    # under the thread sanitizer); the same code runs here in contention_*.
    # Less what only repeats code paths run here by other tests, to keep the
    # whole command short (see step 5 above).
    stage "ctest under address+undefined sanitizers" \
      run_ctest "$root/build/asan" -LE '^(ha|faults)$' \
      -E '^(contention_fairness_.*|contention_pgbouncer|store_contract_pgbouncer|upgrade_mixed_fleet|cli_exec_signals.*|cli_.*_postgres|example_.*_postgres|docs_.*)$'
  else
    skip "ctest under address+undefined sanitizers" "build failed"
  fi

  # Only what the thread sanitizer run needs: the tests with threads of their
  # own or the library's (contention, the manager's wait hub and keep-alive,
  # the stores' release listeners) and the contention workers.
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  if stage "build with thread sanitizer -> build/tsan" \
    build "$root/build/tsan" -DDLM_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug \
    "-DDLM_UNITY_BUILD=$unity_sanitizers" -DBUILD_SHARED_LIBS=OFF -- \
    dlm_contention_tests dlm_contention_worker dlm_deadlock_worker \
    dlm_unit_tests dlm_conformance_tests; then
    # Not the PgBouncer runs: the same threads as the direct ones. Not the
    # fairness runs: they run alone (RUN_SERIAL) to measure shares, on the
    # same code as the contention runs.
    stage "concurrency tests under thread sanitizer" \
      run_ctest "$root/build/tsan" -R '^(contention_|unit$|conformance_)' \
      -E '^((conformance|contention)_pgbouncer|contention_fairness_.*)$'
  else
    skip "concurrency tests under thread sanitizer" "build failed"
  fi
fi

stop_pg
stop_busy
finish
((busy)) && echo "(run with --busy: two CPU-bound processes beside it)"
((failures == 0))

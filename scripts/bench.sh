#!/usr/bin/env bash
# The benchmark command, from a fresh clone on Debian 12 (as root, like
# scripts/test.sh, so that missing packages can be installed and the
# throwaway PostgreSQL cluster can run as its own system user):
#
#   scripts/bench.sh [--quick] [dlm_bench flags...]
#
# 1. installs the build dependencies, PostgreSQL 15 and gnuplot if missing;
# 2. starts a throwaway PostgreSQL cluster (scripts/pg-cluster.sh, fsync on,
#    so commits pay a real flush); BENCH_PG_STAT_STATEMENTS=1 also preloads
#    pg_stat_statements (the roundtrips and guard.server lines then count
#    statements and their time; off by default, so that the cost lines
#    measure a server without that instrumentation);
# 3. builds bench/dlm_bench in Release (build/bench, -DDLM_BUILD_BENCHMARKS=ON);
# 4. runs the standard set: the cost workloads (server CPU per operation from
#    /proc, WAL flushes, client CPU; dlm against (e), (f), (a)) on the local
#    disk, the other workloads, then the cost workloads again with a
#    synchronous standby on loopback (scripts/pg-standby.sh, stopped after);
#    writes bench/results/latest.md (with the targets judged in both
#    conditions), latest.json, the plot data and handoff.png / scale.png;
#    about 10 minutes on 2 cores, --quick about 5 (shorter windows, fewer
#    workloads: cost (with the floor), handoff, junk, events and the SQLite cycle);
# 5. stops the standby and the cluster, whatever happened.
#
# Extra arguments go to dlm_bench (e.g. --cost_seconds=2, --benchmarks=cost);
# BENCH_NOTE="..." is quoted in latest.md as the run's conditions;
# BENCH_CMAKE_ARGS="..." are added to the build's cmake configure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${BENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}
results="$root/bench/results"
build="$root/build/bench"

case "${1:-}" in
  -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
quick=()
if [[ "${1:-}" == --quick ]]; then
  shift
  quick=(--seconds=2 --cost_seconds=0.8 --cost_rounds=3 --waiters=1
    --benchmarks=cost,floor,cycle,handoff,junk,events)
fi

readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev postgresql-15 gnuplot-nox)

# shellcheck source=scripts/install-missing.sh
source "$root/scripts/install-missing.sh"

pg_dir=""
standby_dir=""
stop_pg() {
  if [[ -n "$standby_dir" && -d "$standby_dir" ]]; then
    "$root/scripts/pg-standby.sh" stop "$pg_dir" "$standby_dir" >/dev/null 2>&1 ||
      echo "bench.sh: could not stop the standby in $standby_dir" >&2
  fi
  if [[ -n "$pg_dir" ]]; then
    "$root/scripts/pg-cluster.sh" stop "$pg_dir" >/dev/null 2>&1 ||
      echo "bench.sh: could not stop the PostgreSQL cluster in $pg_dir" >&2
    pg_dir=""
  fi
}
trap 'stop_pg' EXIT
trap 'echo "bench.sh: interrupted" >&2; exit 130' INT TERM

# pg_ctl of the cluster, run as its owner (pg-cluster.sh runs it as the
# system user dlm-test when we are root).
pg_ctl_as_owner() {
  local bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
  [[ -x "$bindir/pg_ctl" ]] ||
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [[ $(id -u) -eq 0 ]]; then
    (cd "$pg_dir" && runuser -u "$(stat -c %U "$pg_dir/data")" -- \
      "$bindir/pg_ctl" "$@")
  else
    "$bindir/pg_ctl" "$@"
  fi
}

echo "=== install missing packages"
install_missing "${packages[@]}"

echo "=== PostgreSQL: start a throwaway cluster"
pg_dir=$(mktemp -d /tmp/dlm-bench-pg.XXXXXX)
"$root/scripts/pg-cluster.sh" start "$pg_dir" >/dev/null
# shellcheck disable=SC1091
. "$pg_dir/env"
if [[ ${BENCH_PG_STAT_STATEMENTS:-0} == 1 ]]; then
  # pg_stat_statements must be preloaded; restart keeps the port (postmaster.opts).
  if psql -qAtc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" &&
    pg_ctl_as_owner -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 -m fast \
      restart >/dev/null; then
    echo "PostgreSQL at $PGHOST:$PGPORT with pg_stat_statements"
  else
    echo "bench.sh: could not preload pg_stat_statements" >&2
  fi
else
  echo "PostgreSQL at $PGHOST:$PGPORT (fsync $(psql -qAtc 'SHOW fsync'))"
fi
standby_dir="$pg_dir-standby"

echo "=== build (Release) -> build/bench"
# BENCH_CMAKE_ARGS: extra configure arguments (e.g. -DDLM_UNITY_BUILD=ALL).
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLM_BUILD_TESTS=OFF \
  -DDLM_BUILD_BENCHMARKS=ON -DDLM_WERROR=ON ${BENCH_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$jobs" --target dlm_bench

echo "=== dlm_bench (standard set)"
mkdir -p "$results" "$build/sqlite"
revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
note="git $revision"
((${#quick[@]})) && note="$note; --quick"
[[ -n "${BENCH_NOTE:-}" ]] && note="$note; $BENCH_NOTE"
started=$SECONDS
"$build/bench/dlm_bench" --results_dir="$results" --sqlite_dir="$build/sqlite" \
  --command="scripts/bench.sh${quick:+ --quick}${*:+ $*}" --note="$note" \
  --standby_start="$root/scripts/pg-standby.sh start $pg_dir $standby_dir" \
  --standby_stop="$root/scripts/pg-standby.sh stop $pg_dir $standby_dir" \
  "${quick[@]}" "$@"
echo "dlm_bench took $((SECONDS - started)) s"

echo "=== plots"
gnuplot -e "dir='$results'" "$root/bench/plot.gp"
echo "wrote $results/latest.md, latest.json, handoff.png, scale.png"

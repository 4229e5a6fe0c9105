#!/usr/bin/env bash
# The benchmark command, from a fresh clone on Debian 12 (as root, like
# scripts/test.sh, so that missing packages can be installed and the
# throwaway PostgreSQL cluster can run as its own system user):
#
#   scripts/bench.sh [dlm_bench flags...]
#
# 1. installs the build dependencies, PostgreSQL 15 and gnuplot if missing;
# 2. starts a throwaway PostgreSQL cluster (scripts/pg-cluster.sh) and
#    restarts it with shared_preload_libraries = pg_stat_statements, so the
#    round-trip workload can count statements on the server and the
#    cycle.server / extend.server lines can give the server time per
#    operation (without it, dlm_bench counts transactions only, prints
#    "server n/a" and says so; WAL flushes come from pg_stat_wal either way);
# 3. builds bench/dlm_bench in Release (build/bench, -DDLM_BUILD_BENCHMARKS=ON);
# 4. runs the standard set (a few minutes) and writes bench/results/latest.md,
#    latest.json, the plot data and handoff.png / scale.png (gnuplot);
# 5. stops the cluster, whatever happened.
#
# Extra arguments go to dlm_bench (e.g. --seconds=10, --benchmarks=cycle);
# BENCH_NOTE="..." is quoted in latest.md as the run's conditions.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${BENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}
results="$root/bench/results"
build="$root/build/bench"

case "${1:-}" in
  -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

readonly packages=(build-essential cmake pkg-config libpqxx-dev libpq-dev
  libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev postgresql-15 gnuplot-nox)

# shellcheck source=scripts/install-missing.sh
source "$root/scripts/install-missing.sh"

pg_dir=""
stop_pg() {
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
# pg_stat_statements must be preloaded; restart keeps the port (postmaster.opts).
if psql -qAtc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" &&
  pg_ctl_as_owner -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 -m fast \
    restart >/dev/null; then
  echo "PostgreSQL at $PGHOST:$PGPORT with pg_stat_statements"
else
  echo "bench.sh: could not preload pg_stat_statements; round trips will be" \
    "counted from pg_stat_database only" >&2
fi

echo "=== build (Release) -> build/bench"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLM_BUILD_TESTS=OFF \
  -DDLM_BUILD_BENCHMARKS=ON -DDLM_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs" --target dlm_bench

echo "=== dlm_bench (standard set)"
mkdir -p "$results" "$build/sqlite"
revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
note="git $revision"
[[ -n "${BENCH_NOTE:-}" ]] && note="$note; $BENCH_NOTE"
started=$SECONDS
"$build/bench/dlm_bench" --results_dir="$results" --sqlite_dir="$build/sqlite" \
  --command="scripts/bench.sh${*:+ $*}" --note="$note" "$@"
echo "dlm_bench took $((SECONDS - started)) s"

echo "=== plots"
gnuplot -e "dir='$results'" "$root/bench/plot.gp"
echo "wrote $results/latest.md, latest.json, handoff.png, scale.png"

#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and demos.
#
#   scripts/pg-cluster.sh start <dir>   initdb (once) + start; writes <dir>/env
#   scripts/pg-cluster.sh stop <dir>    stop (fast) and remove <dir>
#   scripts/pg-cluster.sh restart <dir> fast|immediate
#                                       pg_ctl restart in that shutdown mode
#                                       (for the fault tests); returns once the
#                                       server accepts connections again
#
# The cluster listens only on 127.0.0.1 at a free port, keeps its unix socket
# inside <dir>, trusts every local connection (superuser "postgres") and keeps
# fsync on, so timings measured against it are real; PG_CLUSTER_FSYNC=off at
# the first start turns fsync off instead (scripts/test.sh: on a busy disk the
# checkpoints that DROP DATABASE forces spent 8 s in fsync, and every commit of
# the other tests waited behind them, past their 5 s budgets; no test needs
# durability across an operating-system crash, which fsync is for: a killed
# or restarted server keeps what was written). `start` prints and writes
#   export PGHOST=127.0.0.1 PGPORT=<port> PGUSER=postgres PGDATABASE=postgres
# to <dir>/env; `. <dir>/env` points libpq (and the tests) at it.
#
# Both commands are idempotent: `start` on a running cluster only prints its
# env, `stop` on a missing directory does nothing.
#
# PostgreSQL refuses to run as root, so as root the cluster belongs to the
# system user dlm-test (created if missing) and initdb/pg_ctl run through
# runuser; otherwise it belongs to the calling user.
#
# Binaries: $PG_BINDIR if set, else /usr/lib/postgresql/15/bin, else the newest
# /usr/lib/postgresql/*/bin, else initdb on PATH.
set -euo pipefail

readonly kRunUser=dlm-test
readonly kMarker=.dlm-pg-cluster

die() {
  echo "pg-cluster: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start|stop <dir> | restart <dir> fast|immediate" >&2
  exit 2
}

find_bindir() {
  if [[ -n "${PG_BINDIR:-}" ]]; then
    [[ -x "$PG_BINDIR/initdb" ]] || die "PG_BINDIR=$PG_BINDIR has no initdb"
    echo "$PG_BINDIR"
    return
  fi
  if [[ -x /usr/lib/postgresql/15/bin/initdb ]]; then
    echo /usr/lib/postgresql/15/bin
    return
  fi
  # Debian installs server binaries per major version outside PATH.
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ -n "$d" && -x "$d/initdb" ]]; then
    echo "$d"
    return
  fi
  if command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return
  fi
  die "no PostgreSQL server binaries found (apt-get install postgresql-15)"
}

# Runs a command as the cluster's owner.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$kRunUser" -- "$@"
  else
    "$@"
  fi
}

ensure_run_user() {
  [[ $(id -u) -eq 0 ]] || return 0
  if ! id -u "$kRunUser" >/dev/null 2>&1; then
    # Another start may create the user at the same moment; only fail if it
    # still does not exist afterwards.
    useradd --system --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$kRunUser" 2>/dev/null || true
    id -u "$kRunUser" >/dev/null 2>&1 || die "could not create user $kRunUser"
  fi
}

# shellcheck source=scripts/free-port.sh
source "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

is_running() {
  [[ -f "$data/postmaster.pid" ]] && as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

write_env() {
  local port=$1
  echo "export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres" >"$dir/env.tmp"
  mv "$dir/env.tmp" "$dir/env"
  cat "$dir/env"
}

cmd_start() {
  ensure_run_user
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  data="$dir/data"
  touch "$dir/$kMarker"
  if [[ $(id -u) -eq 0 ]]; then
    chown "$kRunUser" "$dir"
    chmod 0755 "$dir"
    as_owner test -w "$dir" ||
      die "$dir is not writable by $kRunUser (is a parent directory private?)"
  fi
  # Run from inside the directory: the owner may not be allowed into the cwd.
  cd "$dir"

  if is_running; then
    local port
    port=$(sed -n 4p "$data/postmaster.pid")
    write_env "$port"
    return
  fi

  if [[ ! -f "$data/PG_VERSION" ]]; then
    rm -rf "$data"
    mkdir -p "$dir/sock"
    [[ $(id -u) -eq 0 ]] && chown "$kRunUser" "$dir/sock"
    # Locale C: works on a machine without generated locales; dlm's key
    # columns use COLLATE "C" anyway.
    as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 \
      --locale=C >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    cat >>"$data/postgresql.conf" <<EOF

# --- scripts/pg-cluster.sh: a private test cluster ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir/sock'
# Test suites open a pool per store and many stores at once.
max_connections = 200
# What made a call wait: statements of 2 s or more, lock waits past
# deadlock_timeout (1 s), checkpoints (server.log; scripts/test.sh keeps it
# when a stage fails).
log_min_duration_statement = 2000
log_lock_waits = on
log_checkpoints = on
EOF
    if [[ ${PG_CLUSTER_FSYNC:-on} == off ]]; then
      printf '%s\n' "fsync = off" >>"$data/postgresql.conf"
    fi
  fi

  local attempt port
  for attempt in $(seq 1 10); do
    port=$(pick_port)
    # Another process may take the port between the probe and the bind:
    # then the postmaster fails to start and we try another port.
    if as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port" start >/dev/null 2>&1; then
      write_env "$port"
      return
    fi
    if is_running; then
      as_owner "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    echo "pg-cluster: start on port $port failed (attempt $attempt), retrying" >&2
  done
  tail -n 30 "$dir/server.log" >&2 || true
  die "could not start PostgreSQL in $data"
}

cmd_stop() {
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd)
  data="$dir/data"
  if [[ ! -f "$dir/$kMarker" ]] && [[ -n "$(ls -A "$dir")" ]]; then
    die "$dir was not made by this script; not removing it"
  fi
  cd /
  if [[ -f "$data/postmaster.pid" ]]; then
    if [[ $(id -u) -eq 0 ]] && ! id -u "$kRunUser" >/dev/null 2>&1; then
      die "cluster owner $kRunUser is missing; cannot stop $data"
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null 2>&1 &&
      is_running; then
      die "could not stop PostgreSQL in $data"
    fi
  fi
  rm -rf "$dir"
}

# The server keeps its port: pg_ctl restart reuses the options of the last
# start (postmaster.opts), "-p <port>" included, so <dir>/env stays valid.
cmd_restart() {
  local mode=$1
  [[ $mode == fast || $mode == immediate ]] || usage
  [[ -d "$dir" ]] || die "$dir does not exist"
  dir=$(cd "$dir" && pwd)
  data="$dir/data"
  [[ -f "$dir/$kMarker" ]] || die "$dir was not made by this script"
  is_running || die "no PostgreSQL running in $data"
  cd "$dir"
  # -w: pg_ctl returns once the server accepts connections (it polls with
  # PQping), which is the instant the fault tests measure from.
  as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -m "$mode" -w \
    -t 60 restart >/dev/null 2>&1 ||
    { tail -n 30 "$dir/server.log" >&2 || true; die "restart ($mode) failed"; }
}

(($# >= 2)) || usage
action=$1
dir=$2
data=""
bindir=$(find_bindir)
case "$action" in
  start) (($# == 2)) || usage; cmd_start ;;
  stop) (($# == 2)) || usage; cmd_stop ;;
  restart) (($# == 3)) || usage; cmd_restart "$3" ;;
  *) usage ;;
esac

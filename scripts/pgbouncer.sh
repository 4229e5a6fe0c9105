#!/usr/bin/env bash
# A throwaway PgBouncer in front of a throwaway cluster (scripts/pg-cluster.sh),
# for the tests of the store's pooler-safe mode.
#
#   scripts/pgbouncer.sh start <dir> <cluster dir>   start; writes <dir>/env
#   scripts/pgbouncer.sh stop <dir>                  stop and remove <dir>
#
# PgBouncer listens only on 127.0.0.1 at a free port, in transaction pooling
# mode, and passes every database to the cluster (same name, same user). It
# trusts the users listed in <dir>/users.txt (PGUSER of the cluster to begin
# with; tests append their login roles and send RELOAD on the admin console,
# database "pgbouncer", as that user). `start` writes
#   export DLM_TEST_PGBOUNCER_PORT=<port> DLM_TEST_PGBOUNCER_AUTH_FILE=<file>
# to <dir>/env. As root, PgBouncer runs as the cluster's owner (dlm-test).
# Needs Debian's pgbouncer package.
set -euo pipefail

die() {
  echo "pgbouncer.sh: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 start <dir> <cluster dir> | stop <dir>" >&2
  exit 2
}

# shellcheck source=scripts/free-port.sh
source "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

start() {
  local dir=$1 cluster=$2
  [[ -f "$cluster/env" ]] || die "$cluster/env missing: start the cluster first"
  command -v pgbouncer >/dev/null || die "pgbouncer not installed (apt-get install pgbouncer)"
  local pgport pguser owner port
  pgport=$(bash -c ". '$cluster/env'; echo \$PGPORT")
  pguser=$(bash -c ". '$cluster/env'; echo \$PGUSER")
  owner=$(stat -c %U "$cluster/data")
  mkdir -p "$dir"
  port=$(pick_port)
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$pgport

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
admin_users = $pguser
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
# Every test logs in with roles of its own, so every test leaves pools of
# its own behind; their idle server connections would stay 10 minutes (the
# default) and, over repeated runs against one server, use up its
# max_connections ("remaining connection slots are reserved").
server_idle_timeout = 10
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  echo "\"$pguser\" \"\"" >"$dir/users.txt"
  chmod 0755 "$dir"
  chmod 0644 "$dir/pgbouncer.ini" "$dir/users.txt"
  if [[ $(id -u) -eq 0 ]]; then
    chown "$owner" "$dir"
    runuser -u "$owner" -- pgbouncer -d "$dir/pgbouncer.ini"
  else
    pgbouncer -d "$dir/pgbouncer.ini"
  fi
  for _ in $(seq 1 100); do
    port_in_use "$port" && break
    sleep 0.1
  done
  port_in_use "$port" || die "PgBouncer did not start (see $dir/pgbouncer.log)"
  echo "export DLM_TEST_PGBOUNCER_PORT=$port DLM_TEST_PGBOUNCER_AUTH_FILE=$dir/users.txt" |
    tee "$dir/env"
}

stop() {
  local dir=$1
  [[ -d "$dir" ]] || return 0
  if [[ -f "$dir/pgbouncer.pid" ]]; then
    local pid
    pid=$(cat "$dir/pgbouncer.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) [[ $# -eq 3 ]] || usage; start "$2" "$3" ;;
  stop) [[ $# -eq 2 ]] || usage; stop "$2" ;;
  *) usage ;;
esac

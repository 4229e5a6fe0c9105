#!/usr/bin/env bash
# A synchronous streaming standby of a scripts/pg-cluster.sh cluster, on
# loopback, for the benchmark's "sync standby" condition (production runs a
# primary with a synchronous standby: docs/operations.md).
#
#   scripts/pg-standby.sh start <primary-dir> <standby-dir>
#       pg_basebackup of the primary into <standby-dir> (-R: standby.signal
#       and primary_conninfo with application_name=dlm_bench_standby),
#       starts it on a free port, then sets on the primary
#       synchronous_standby_names = 'dlm_bench_standby' (reload) and waits
#       until pg_stat_replication shows it streaming with sync_state 'sync':
#       from then on every durable commit waits for the standby's flush.
#   scripts/pg-standby.sh stop <primary-dir> <standby-dir>
#       resets synchronous_standby_names on the primary (reload), stops the
#       standby and removes <standby-dir>.
#
# As root, like pg-cluster.sh: the standby belongs to the primary's owner.
# The primary's pg_hba.conf (initdb --auth=trust) already trusts
# replication connections from 127.0.0.1.
set -euo pipefail

readonly kName=dlm_bench_standby
readonly kMarker=.dlm-pg-standby

die() {
  echo "pg-standby: $*" >&2
  exit 1
}

(($# == 3)) || die "usage: $0 start|stop <primary-dir> <standby-dir>"
action=$1
primary=$(cd "$2" && pwd) || die "no primary directory $2"
standby=$3

bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
[[ -x "$bindir/pg_basebackup" ]] ||
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x "$bindir/pg_basebackup" ]] || die "no pg_basebackup found"

owner=$(stat -c %U "$primary/data")
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$owner" -- "$@"
  else
    "$@"
  fi
}

# shellcheck disable=SC1091
. "$primary/env"
psql_primary() { psql -X -qAt -v ON_ERROR_STOP=1 -c "$1"; }

# shellcheck source=scripts/free-port.sh
source "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

cmd_start() {
  mkdir -p "$standby"
  standby=$(cd "$standby" && pwd)
  touch "$standby/$kMarker"
  [[ $(id -u) -eq 0 ]] && chown "$owner" "$standby" && chmod 0755 "$standby"
  cd "$standby"
  rm -rf "$standby/data"
  as_owner "$bindir/pg_basebackup" -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" \
    -D "$standby/data" -X stream -R -c fast >"$standby/basebackup.log" 2>&1 ||
    { cat "$standby/basebackup.log" >&2; die "pg_basebackup failed"; }
  mkdir -p "$standby/sock"
  [[ $(id -u) -eq 0 ]] && chown "$owner" "$standby/sock"
  cat >>"$standby/data/postgresql.conf" <<CONF

# --- scripts/pg-standby.sh ---
unix_socket_directories = '$standby/sock'
hot_standby = on
CONF
  # -R wrote primary_conninfo without an application_name: name the
  # standby so that synchronous_standby_names can select it.
  printf "primary_conninfo = 'host=%s port=%s user=%s application_name=%s'\n" \
    "$PGHOST" "$PGPORT" "$PGUSER" "$kName" >>"$standby/data/postgresql.auto.conf"
  local port attempt started=no
  for attempt in 1 2 3 4 5; do
    port=$(pick_port)
    if as_owner "$bindir/pg_ctl" -D "$standby/data" -l "$standby/server.log" \
      -w -t 60 -o "-p $port" start >/dev/null 2>&1; then
      started=yes
      break
    fi
    echo "pg-standby: start on port $port failed (attempt $attempt)" >&2
  done
  [[ $started == yes ]] || { tail -n 20 "$standby/server.log" >&2; die "standby did not start"; }
  psql_primary "ALTER SYSTEM SET synchronous_standby_names = '$kName'"
  psql_primary "SELECT pg_reload_conf()" >/dev/null
  local i
  for i in $(seq 1 300); do
    if [[ $(psql_primary "SELECT count(*) FROM pg_stat_replication WHERE \
application_name = '$kName' AND state = 'streaming' AND sync_state = 'sync'") == 1 ]]; then
      echo "pg-standby: $kName streaming on port $port, synchronous"
      return
    fi
    sleep 0.1
  done
  die "the standby did not become synchronous (see $standby/server.log)"
}

cmd_stop() {
  psql_primary "ALTER SYSTEM RESET synchronous_standby_names" || true
  psql_primary "SELECT pg_reload_conf()" >/dev/null || true
  [[ -d "$standby" ]] || return 0
  standby=$(cd "$standby" && pwd)
  [[ -f "$standby/$kMarker" ]] || die "$standby was not made by this script"
  cd /
  if [[ -f "$standby/data/postmaster.pid" ]]; then
    as_owner "$bindir/pg_ctl" -D "$standby/data" -m fast -w -t 60 stop \
      >/dev/null 2>&1 || die "could not stop the standby in $standby"
  fi
  rm -rf "$standby"
  echo "pg-standby: stopped; synchronous_standby_names reset"
}

case "$action" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  *) die "usage: $0 start|stop <primary-dir> <standby-dir>" ;;
esac

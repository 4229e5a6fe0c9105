#!/usr/bin/env bash
# A throwaway pg_auto_failover formation for the failover tests: a
# monitor and two PostgreSQL nodes on loopback, all inside one directory.
#
#   scripts/pg-auto-failover.sh start <dir>         form it (once); writes <dir>/env
#   scripts/pg-auto-failover.sh stop <dir>          stop everything, remove <dir>
#   scripts/pg-auto-failover.sh state <dir>         pg_autoctl show state
#   scripts/pg-auto-failover.sh primary <dir>       "node1 <port>" of the primary
#                                                   as the monitor sees it (a
#                                                   killed one until it notices);
#                                                   exit 1 when none
#   scripts/pg-auto-failover.sh failover <dir>      planned failover; returns once
#                                                   the old primary is a secondary
#   scripts/pg-auto-failover.sh kill-primary <dir>  SIGKILL the primary node (its
#                                                   pg_autoctl and its postmaster)
#                                                   and return at once
#   scripts/pg-auto-failover.sh kill-postmaster <dir>
#                                                   SIGKILL only the primary's
#                                                   postmaster: its pg_autoctl
#                                                   restarts it in place, no
#                                                   failover
#   scripts/pg-auto-failover.sh wait-healthy <dir> [seconds]
#                                                   restart a killed node's
#                                                   pg_autoctl and wait until the
#                                                   formation has a primary and a
#                                                   secondary again (default 120 s)
#
# Node1 starts as the primary, node2 as its synchronous standby (the
# formation's default: number_sync_standbys 0 with replication quorum, so
# synchronous_standby_names names the standby once it has caught up). Every
# server listens only on 127.0.0.1 at a free port, keeps its unix socket in
# <dir>/sock (not /var/run/postgresql), trusts local connections and has
# superuser "postgres" on the nodes. `start` writes to <dir>/env:
#   export DLM_TEST_HA_URL=postgresql://postgres@127.0.0.1:<p1>,127.0.0.1:<p2>/dlm_test?target_session_attrs=read-write
#   export DLM_TEST_HA_DIR=<dir> DLM_TEST_HA_MONITOR=<monitor URI>
#   export DLM_TEST_HA_NODE1_PORT=<p1> DLM_TEST_HA_NODE1_DATA=<dir>/node1
#   export DLM_TEST_HA_NODE2_PORT=<p2> DLM_TEST_HA_NODE2_DATA=<dir>/node2
# Logs: <dir>/{monitor,node1,node2}.log (pg_autoctl) and each data
# directory's log/ (PostgreSQL).
#
# Why kill-primary kills the node's pg_autoctl too: a SIGKILLed postmaster
# alone is restarted in place by its own pg_autoctl within a second, and the
# monitor never fails over. Killing both is a crashed machine: the monitor's
# health checks fail and it promotes the standby. wait-healthy then starts
# the dead node's pg_autoctl again, which rewinds it and rejoins as secondary.
# Until then the new primary is in state wait_primary, where pg_auto_failover
# clears synchronous_standby_names: commits there are not replicated
# synchronously (the same holds from a planned failover's promotion until the
# old primary has rejoined).
#
# The monitor's health checks and the keepers' timeouts are shortened (see
# kMonitorSettings and kNodeTimeouts) so a failover takes seconds, keeping
# network_partition_timeout (after which a primary cut off from the monitor
# and the standby demotes itself) below primary_demote_timeout (after which
# the monitor promotes the standby of an unreachable primary), as the defaults
# (20 s, 30 s) do.
#
# start and stop are idempotent. As root everything runs as the system user
# dlm-test (the owner of scripts/pg-cluster.sh's clusters, created if
# missing) through runuser. Needs Debian's pg-auto-failover-cli and
# postgresql-15-auto-failover.
set -euo pipefail

# The caller's PG* variables name another server (the test command exports
# its throwaway cluster's PGHOST, PGPORT, PGUSER, ...): pg_autoctl and psql
# here must not inherit them. PG_BINDIR is this script's own setting.
for v in $(compgen -e); do
  if [[ $v == PG* && $v != PG_BINDIR ]]; then unset "$v"; fi
done

readonly kRunUser=dlm-test
readonly kMarker=.dlm-pg-auto-failover
readonly kBinDir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
readonly kDatabase=dlm_test
# Monitor GUCs, in ms (defaults in brackets).
readonly kMonitorSettings="
pgautofailover.health_check_period = 1000        # [5000]
pgautofailover.health_check_timeout = 1000       # [5000]
pgautofailover.health_check_max_retries = 1      # [2]
pgautofailover.health_check_retry_delay = 500    # [2000]
pgautofailover.node_considered_unhealthy_timeout = 3000 # [20000]
pgautofailover.startup_grace_period = 3000       # [10000]
pgautofailover.primary_demote_timeout = 6000     # [30000]
"
# Keeper settings, in s.
readonly kNodeTimeouts="timeout.network_partition_timeout=4"
# pg_autoctl sizes memory for a dedicated machine (a quarter of RAM as
# shared_buffers); these are appended after its include and win.
readonly kSmallMemory="
shared_buffers = '128MB'
work_mem = '4MB'
maintenance_work_mem = '64MB'
effective_cache_size = '1GB'
"

die() {
  echo "pg-auto-failover: $*" >&2
  exit 1
}

usage() {
  sed -n '4,26p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# shellcheck source=scripts/free-port.sh
source "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

ensure_run_user() {
  [[ $(id -u) -eq 0 ]] || return 0
  if ! id -u "$kRunUser" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$kRunUser" 2>/dev/null || true
    id -u "$kRunUser" >/dev/null 2>&1 || die "could not create user $kRunUser"
  fi
}

# Runs a command as the formation's owner, with pg_autoctl's files (config,
# state, pid files) and the unix sockets kept inside $dir.
as_owner() {
  local -a envs=(HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/config"
    XDG_DATA_HOME="$dir/home/share" XDG_RUNTIME_DIR="$dir/home/run"
    PG_REGRESS_SOCK_DIR="$dir/sock" PGHOST="$dir/sock"
    PATH="$kBinDir:/usr/bin:/bin")
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u "$kRunUser" -- env "${envs[@]}" "$@"
  else
    env "${envs[@]}" "$@"
  fi
}

# as_owner for the nodes: pg_autoctl connects to them as PGUSER.
as_node_owner() { as_owner PGUSER=postgres "$@"; }

# A pg_autoctl client command, in a session of its own: some signal their
# service through a pid file, and a stray signal must not reach our caller.
ctl() { as_owner setsid -w pg_autoctl "$@"; }
node_ctl() { as_node_owner setsid -w pg_autoctl "$@"; }

monitor_uri() { cat "$dir/monitor.uri"; }

# Starts `pg_autoctl <args>` for <name> in the background, in its own session
# (so stop can signal its process group), logging to <dir>/<name>.log.
spawn() {
  local name=$1
  shift
  rm -f "$dir/$name.pid"
  local pgu=()
  [[ $name != monitor ]] && pgu=(PGUSER=postgres)
  # The inner shell records its pid, then becomes pg_autoctl.
  # shellcheck disable=SC2016
  as_owner "${pgu[@]}" setsid bash -c 'echo $$ >"$0"; exec "$@"' \
    "$dir/$name.pid" pg_autoctl "$@" >>"$dir/$name.log" 2>&1 </dev/null &
  local _
  for _ in $(seq 1 50); do
    [[ -s "$dir/$name.pid" ]] && return 0
    sleep 0.1
  done
  die "pg_autoctl for $name did not start"
}

alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }
pid_of() { cat "$dir/$1.pid" 2>/dev/null || true; }
postmaster_pid() { head -n 1 "$dir/$1/postmaster.pid" 2>/dev/null || true; }

# Rows "name port reportedstate goalstate" from the monitor.
nodes() {
  as_owner psql -qAtX -F ' ' "$(monitor_uri)" -c \
    "select nodename, nodeport, reportedstate, goalstate from pgautofailover.node
     where formationid = 'default' order by nodeid" 2>/dev/null
}

# "name port" of the node that is primary on the monitor (reported and
# assigned), nothing when there is none.
current_primary() {
  nodes | awk '($3 == "primary" || $3 == "wait_primary" || $3 == "single") && $3 == $4 { print $1, $2; exit }'
}

# Runs SQL on node <port> as postgres; prints the result.
sql_at() {
  as_node_owner psql -qAtX -h "$dir/sock" -p "$1" -d postgres -c "$2" 2>/dev/null
}

# True when one node is primary and another secondary, both as assigned, the
# secondary answers and streams to the primary as its synchronous standby (the
# monitor notices a dead server only after seconds, and a restarted primary
# blocks commits until its standby reconnects).
healthy() {
  local rows p s
  rows=$(nodes) || return 1
  p=$(awk '$3 == "primary" && $4 == "primary" { print $2 }' <<<"$rows")
  s=$(awk '$3 == "secondary" && $4 == "secondary" { print $2 }' <<<"$rows")
  [[ $p =~ ^[0-9]+$ && $s =~ ^[0-9]+$ ]] || return 1
  [[ "$(sql_at "$s" 'select pg_is_in_recovery()')" == t ]] || return 1
  [[ "$(sql_at "$p" "select count(*) from pg_stat_replication
                     where sync_state in ('sync', 'quorum')")" -ge 1 ]]
}

wait_healthy() {
  local seconds=$1 _
  for _ in $(seq 1 $((seconds * 5))); do
    healthy && return 0
    sleep 0.2
  done
  return 1
}

show_tail() {
  local f
  for f in monitor node1 node2; do
    [[ -f "$dir/$f.log" ]] && { echo "--- $f.log" >&2; tail -n 15 "$dir/$f.log" >&2; }
  done
  return 0
}

# initdb of a node's data directory by us, not by pg_autoctl: superuser
# "postgres", locale C, sockets in <dir>/sock, small memory.
init_node() {
  local name=$1
  as_owner initdb -D "$dir/$name" -U postgres --auth=trust -E UTF8 --locale=C \
    >"$dir/$name-initdb.log" 2>&1 ||
    { cat "$dir/$name-initdb.log" >&2; die "initdb of $name failed"; }
  cat >>"$dir/$name/postgresql.conf" <<EOF

# --- scripts/pg-auto-failover.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir/sock'
max_connections = 200
# A standby retries a lost primary every 5 s otherwise; with synchronous
# replication every commit on the primary waits for that.
wal_retrieve_retry_interval = '500ms'
# pg_basebackup (a standby joining) waits for a spread checkpoint otherwise:
# 90 s on an idle server.
checkpoint_completion_target = 0
$kSmallMemory
EOF
}

# pg_autoctl create postgres --run for node <name> on a free port.
create_node() {
  local name=$1 port
  port=$(pick_port)
  echo "$port" >"$dir/$name.port"
  spawn "$name" create postgres --pgdata "$dir/$name" --pgport "$port" \
    --listen 127.0.0.1 --hostname 127.0.0.1 --name "$name" \
    --pghost "$dir/sock" --username postgres --dbname "$kDatabase" \
    --monitor "$(monitor_uri)" --auth trust --no-ssl \
    --pgctl "$kBinDir/pg_ctl" --run
}

# Shortens the timeouts of the keeper of <name>: `config set` signals the
# running pg_autoctl to reload. Only once the node's PostgreSQL runs: a
# reload before that makes pg_autoctl 2.0's postgres service signal pid -1,
# i.e. every process of the user.
tune_node() {
  local name=$1 cfg="$dir/home/config/pg_autoctl$dir/$1/pg_autoctl.cfg" _ kv
  for _ in $(seq 1 100); do
    [[ -f $cfg ]] && break
    sleep 0.2
  done
  [[ -f $cfg ]] || die "no configuration for $name"
  for kv in $kNodeTimeouts; do
    node_ctl config set --pgdata "$dir/$name" "${kv%%=*}" "${kv#*=}" >/dev/null
  done
}

wait_state() {
  local what=$1 seconds=$2 _
  shift 2
  for _ in $(seq 1 $((seconds * 5))); do
    "$@" && return 0
    sleep 0.2
  done
  show_tail
  die "timed out after ${seconds}s waiting for $what"
}

node1_single() { nodes | grep -q '^node1 [0-9]* single single$'; }

write_env() {
  local p1 p2
  p1=$(cat "$dir/node1.port")
  p2=$(cat "$dir/node2.port")
  cat >"$dir/env.tmp" <<EOF
export DLM_TEST_HA_URL='postgresql://postgres@127.0.0.1:$p1,127.0.0.1:$p2/$kDatabase?target_session_attrs=read-write'
export DLM_TEST_HA_DIR='$dir' DLM_TEST_HA_MONITOR='$(monitor_uri)'
export DLM_TEST_HA_NODE1_PORT=$p1 DLM_TEST_HA_NODE1_DATA='$dir/node1'
export DLM_TEST_HA_NODE2_PORT=$p2 DLM_TEST_HA_NODE2_DATA='$dir/node2'
EOF
  mv "$dir/env.tmp" "$dir/env"
  cat "$dir/env"
}

cmd_start() {
  local t0
  t0=$(now)
  command -v pg_autoctl >/dev/null ||
    die "pg_autoctl missing (apt-get install pg-auto-failover-cli postgresql-15-auto-failover)"
  [[ -x "$kBinDir/pg_ctl" ]] || die "no $kBinDir/pg_ctl (apt-get install postgresql-15)"
  ensure_run_user
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ -f "$dir/env" ]] && healthy; then
    cat "$dir/env"
    return
  fi
  [[ -z "$(ls -A "$dir")" || -f "$dir/$kMarker" ]] ||
    die "$dir is not empty and was not made by this script"
  [[ ! -e "$dir/monitor" ]] ||
    die "$dir holds a formation that is not healthy; stop it first"
  touch "$dir/$kMarker"
  # home/run is XDG_RUNTIME_DIR, where pg_autoctl keeps its pid files (in
  # /tmp/pg_autoctl when it is missing).
  mkdir -p "$dir/sock" "$dir/home/run"
  chmod 0700 "$dir/home/run"
  if [[ $(id -u) -eq 0 ]]; then
    chown "$kRunUser" "$dir" "$dir/sock" "$dir/home" "$dir/home/run"
    chmod 0755 "$dir"
    as_owner test -w "$dir" ||
      die "$dir is not writable by $kRunUser (is a parent directory private?)"
  fi
  # The owner may not be allowed into the caller's working directory.
  cd "$dir"

  # Monitor: created stopped, then loopback only, small memory, fast checks.
  local mport
  mport=$(pick_port)
  echo "postgres://autoctl_node@127.0.0.1:$mport/pg_auto_failover?sslmode=disable" >"$dir/monitor.uri"
  ctl create monitor --pgdata "$dir/monitor" --pgport "$mport" \
    --hostname 127.0.0.1 --auth trust --no-ssl --pgctl "$kBinDir/pg_ctl" \
    >>"$dir/monitor.log" 2>&1 || { show_tail; die "pg_autoctl create monitor failed"; }
  ctl config set --pgdata "$dir/monitor" \
    postgresql.listen_addresses 127.0.0.1 >/dev/null
  printf '\n# --- scripts/pg-auto-failover.sh ---%s%s' "$kSmallMemory" \
    "$kMonitorSettings" >>"$dir/monitor/postgresql.conf"
  spawn monitor run --pgdata "$dir/monitor"
  wait_state "the monitor" 60 nodes

  # node1 first, as the primary; node2 then clones it.
  init_node node1
  create_node node1
  wait_state "node1 to be single" 60 node1_single
  create_node node2
  wait_state "a primary and a secondary" 180 healthy
  tune_node node1
  tune_node node2
  [[ "$(sql_at "$(cat "$dir/node1.port")" \
    "select 1 from pg_database where datname = '$kDatabase'")" == 1 ]] ||
    as_node_owner psql -qX -h "$dir/sock" -p "$(cat "$dir/node1.port")" -d postgres \
      -c "create database $kDatabase" >/dev/null
  write_env
  echo "pg-auto-failover: formed in $(since "$t0") s" >&2
}

# Waits up to <tenths> tenths of a second until none of the pids is alive.
wait_gone() {
  local tenths=$1 _ p
  shift
  for _ in $(seq 1 "$tenths"); do
    for p in "$@"; do
      alive "$p" && { sleep 0.1; continue 2; }
    done
    return 0
  done
  return 0
}

# Stops the three pg_autoctl and their PostgreSQL servers, all at once (each
# pg_autoctl stops its server in fast mode on SIGTERM); SIGKILL if they linger.
stop_all() {
  local name pid pm pids=() pms=() _
  for name in node2 node1 monitor; do
    pid=$(pid_of "$name")
    pm=$(postmaster_pid "$name")
    if alive "$pid"; then
      pids+=("$pid")
      kill -TERM "$pid" 2>/dev/null || true
    fi
    if alive "$pm"; then pms+=("$pm"); fi
  done
  wait_gone 100 "${pids[@]}" "${pms[@]}"
  for pm in "${pms[@]}"; do
    if alive "$pm"; then kill -INT "$pm" 2>/dev/null || true; fi
  done
  wait_gone 50 "${pms[@]}"
  for pid in "${pids[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  for pm in "${pms[@]}"; do
    if alive "$pm"; then kill -KILL "$pm" 2>/dev/null || true; fi
  done
  return 0
}

# Pids of the processes whose command line or working directory is in
# $dir[/<sub>] (PostgreSQL's children run in their data directory).
leftovers() {
  local in="$dir${1:+/$1}"
  {
    pgrep -f -- "$in/" || true
    find /proc/[0-9]*/cwd -maxdepth 0 \( -lname "$in" -o -lname "$in/*" \) \
      2>/dev/null | cut -d/ -f3
  } | grep -vx "$$" | sort -u || true
}

cmd_stop() {
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd)
  if [[ ! -f "$dir/$kMarker" ]] && [[ -n "$(ls -A "$dir")" ]]; then
    die "$dir was not made by this script; not removing it"
  fi
  cd /
  stop_all
  local _ left
  for _ in $(seq 1 50); do
    left=$(leftovers)
    [[ -z "$left" ]] && break
    sleep 0.1
  done
  if [[ -n "$left" ]]; then
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null || true
    sleep 0.2
  fi
  rm -rf "$dir"
}

need_formation() {
  [[ -d "$dir" ]] || die "$dir does not exist"
  dir=$(cd "$dir" && pwd)
  [[ -f "$dir/$kMarker" && -f "$dir/monitor.uri" ]] || die "$dir was not made by this script"
  cd "$dir"
}

cmd_state() {
  ctl show state --monitor "$(monitor_uri)"
}

cmd_primary() {
  local p
  p=$(current_primary)
  [[ -n "$p" ]] || { echo "no primary" >&2; return 1; }
  echo "$p"
}

cmd_failover() {
  local t0 old
  t0=$(now)
  healthy || die "formation not healthy before failover"
  old=$(current_primary)
  # The monitor's perform_failover can meet a keeper's report in a deadlock
  # (seen on a busy machine: "deadlock detected" between the node row's
  # UPDATE and the monitor's advisory lock). PostgreSQL aborts one side; the
  # call is one transaction, so nothing changed, and it is made again.
  local attempt out="$dir/failover.attempt.log"
  for attempt in 1 2 3; do
    if ctl perform failover --monitor "$(monitor_uri)" >"$out" 2>&1; then
      cat "$out" >>"$dir/failover.log"
      break
    fi
    cat "$out" >>"$dir/failover.log"
    if ((attempt < 3)) && grep -q "deadlock detected" "$out"; then
      echo "pg-auto-failover: the monitor met a deadlock; failover again" >&2
      sleep 1
      continue
    fi
    tail -n 20 "$out" >&2
    die "failover failed"
  done
  wait_state "the failover to finish" 60 healthy
  local new
  new=$(current_primary)
  [[ "$new" != "$old" ]] || die "primary is still $old after failover"
  echo "pg-auto-failover: failover $old -> $new in $(since "$t0") s" >&2
  echo "$new"
}

cmd_kill_primary() {
  local p name pm pid
  p=$(current_primary)
  [[ -n "$p" ]] || die "no primary to kill"
  name=${p%% *}
  pid=$(pid_of "$name")
  pm=$(postmaster_pid "$name")
  # The whole node dies at once: its pg_autoctl (supervisor, keeper, postgres
  # controller share its process group) and its postmaster.
  if [[ -n "$pid" ]]; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
  if [[ -n "$pm" ]]; then kill -KILL "$pm" 2>/dev/null || true; fi
  echo "$name" >"$dir/killed"
  echo "pg-auto-failover: killed $p (pg_autoctl $pid, postmaster $pm)" >&2
  echo "$p"
}

cmd_kill_postmaster() {
  local p name pm
  p=$(current_primary)
  [[ -n "$p" ]] || die "no primary to kill"
  name=${p%% *}
  pm=$(postmaster_pid "$name")
  [[ -n "$pm" ]] || die "no postmaster.pid for $name"
  kill -KILL "$pm"
  echo "pg-auto-failover: killed the postmaster of $p ($pm)" >&2
  echo "$p"
}

cmd_wait_healthy() {
  local seconds=${1:-120} t0 name pid _
  t0=$(now)
  if [[ -f "$dir/killed" ]]; then
    name=$(cat "$dir/killed")
    # The monitor promotes the standby first; restarting the dead node before
    # that would let its keeper restart it as the primary it was.
    # shellcheck disable=SC2016
    wait_state "a new primary" "$seconds" eval '[[ -n "$(current_primary)" && "$(current_primary)" != "$name "* ]]'
    echo "pg-auto-failover: new primary $(current_primary) after $(since "$t0") s" >&2
    # The killed postmaster's children exit on their own; pg_autoctl refuses
    # to start while the old postmaster.pid is in use.
    for _ in $(seq 1 50); do
      [[ -z "$(leftovers "$name")" ]] && break
      sleep 0.1
    done
    pid=$(pid_of "$name")
    alive "$pid" || spawn "$name" run --pgdata "$dir/$name"
    rm -f "$dir/killed"
  fi
  wait_healthy "$seconds" || { show_tail; die "not healthy after ${seconds}s"; }
  echo "pg-auto-failover: healthy after $(since "$t0") s" >&2
}

(($# >= 2)) || usage
action=$1
dir=$2
case "$action" in
  start) (($# == 2)) || usage; cmd_start ;;
  stop) (($# == 2)) || usage; cmd_stop ;;
  state) (($# == 2)) || usage; need_formation; cmd_state ;;
  primary) (($# == 2)) || usage; need_formation; cmd_primary ;;
  failover) (($# == 2)) || usage; need_formation; cmd_failover ;;
  kill-primary) (($# == 2)) || usage; need_formation; cmd_kill_primary ;;
  kill-postmaster) (($# == 2)) || usage; need_formation; cmd_kill_postmaster ;;
  wait-healthy) (($# <= 3)) || usage; need_formation; cmd_wait_healthy "${3:-120}" ;;
  *) usage ;;
esac

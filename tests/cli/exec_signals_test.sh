#!/usr/bin/env bash
# dlmctl exec under the signals an operator sends, on the database named by
# $2 (default: a temp SQLite file; "postgresql://" takes the server from the
# PG* variables and fails without one). The promise checked: the command
# never runs without the lock, and the lock is never kept for a command that
# ended. Prints, per case, how long the command outlived dlmctl (must be ~0)
# and when the lock was free afterwards.
#
#   exec_signals_test.sh DLMCTL [DB_URL]
set -euo pipefail
# Job control: background jobs keep SIGINT (a non-interactive shell would
# start them with SIGINT ignored, and Ctrl-C could not be imitated).
set -m
dlmctl=$1
dir=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
db=${2:-sqlite:$dir/locks.sqlite}
# A client id of its own: runs on a shared PostgreSQL never see each other.
dl=("$dlmctl" --db "$db" --client "exectest$$x$RANDOM")
fail() { echo "FAIL: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
# Alive and not a zombie (an orphan's zombie may wait for a slow init).
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
# wait_for MS CMD...: polls CMD every 20 ms for at most MS; status 1 on timeout.
wait_for() {
  local end=$(($(now_ms) + $1))
  shift
  until "$@"; do
    (($(now_ms) < end)) || return 1
    sleep 0.02
  done
}
is_free() { "${dl[@]}" exec -n --lock "$1" true 2>/dev/null; }
is_held() { local s=0; "${dl[@]}" exec -n --lock "$1" true 2>/dev/null || s=$?; [ "$s" = 75 ]; }
not_alive() { ! alive "$1"; }
is_stopped() { grep -q '^[0-9]* (.*) T' "/proc/$1/stat" 2>/dev/null; }
exists() { [ -s "$1" ]; }

"${dl[@]}" migrate --client-role dlm_client --admin-role dlm_admin >/dev/null ||
  fail "cannot prepare the database $db (PostgreSQL: the PG* variables of scripts/test.sh)"

# start_holder NAME LOCK [exec options] -- SCRIPT: runs dlmctl exec in the
# background with a command that writes its pid to $dir/NAME.pid, waits until
# that pid is there; sets holder (dlmctl's pid) and child.
start_holder() {
  local name=$1 lock=$2
  shift 2
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  "${dl[@]}" exec --lock "$lock" "${opts[@]}" -- sh -c "echo \$\$ > $dir/$name.pid; $1" \
    2>"$dir/$name.err" &
  holder=$!
  wait_for 5000 exists "$dir/$name.pid" || fail "$name: the command did not start"
  child=$(cat "$dir/$name.pid")
}

# signal_case NAME SIGNAL WANTED_STATUS: dlmctl alone gets SIGNAL; the
# command must end with it and the lock be free at once (TTL 30 s).
signal_case() {
  local name=$1 sig=$2 want=$3 status=0
  start_holder "$name" "sig.$name" --ttl 30 -- "exec sleep 30"
  kill -s "$sig" "$holder"
  local t0
  t0=$(now_ms)
  wait "$holder" || status=$?
  local t1
  t1=$(now_ms)
  # dlmctl waits for the command: it must be gone already.
  ! alive "$child" || fail "$name: the command still ran when dlmctl exited"
  wait_for 5000 not_alive "$child" || fail "$name: the command outlived dlmctl by 5 s"
  local t2
  t2=$(now_ms)
  wait_for 5000 is_free "sig.$name" || fail "$name: the lock is still held 5 s after dlmctl ended"
  local t3
  t3=$(now_ms)
  echo "$name: dlmctl exited $status after $((t1 - t0)) ms; the command outlived it by $((t2 - t1)) ms; the lock was free $((t3 - t1)) ms after dlmctl exited (TTL 30 s)"
  [ "$status" = "$want" ] || fail "$name: dlmctl exited $status, wanted $want"
  (($(now_ms) - t1 < 3000)) || fail "$name: the lock was not free at once"
}

signal_case SIGTERM TERM 143
signal_case SIGINT INT 130
signal_case SIGHUP HUP 129

# A stopped command (as after Ctrl-Z, or reading the terminal from outside
# the foreground group) still acts on the forwarded SIGTERM: it gets SIGCONT.
start_holder stopped sig.stopped --ttl 30 -- "kill -STOP \$\$"
wait_for 5000 is_stopped "$child" || fail "stopped: the command did not stop"
status=0
kill -TERM "$holder"
t0=$(now_ms)
wait_for 5000 not_alive "$holder" || fail "stopped: dlmctl still waits 5 s after SIGTERM"
wait "$holder" || status=$?
echo "stopped command: dlmctl exited $status $(($(now_ms) - t0)) ms after SIGTERM"
[ "$status" = 143 ] || fail "stopped: dlmctl exited $status, wanted 143"

# SIGKILL: nothing of dlmctl runs; the command dies by PDEATHSIG and the lock
# stays held until its 3 s TTL.
start_holder kill9 sig.kill9 --ttl 3 -- "exec sleep 30"
kill -9 "$holder"
t0=$(now_ms)
wait "$holder" 2>/dev/null || true
wait_for 5000 not_alive "$child" || fail "SIGKILL: the command outlived dlmctl by 5 s"
t1=$(now_ms)
is_held sig.kill9 || fail "SIGKILL: the lock was free before its TTL"
wait_for 8000 is_free sig.kill9 || fail "SIGKILL: the lock still held 8 s after a 3 s TTL"
t2=$(now_ms)
echo "SIGKILL: the command outlived dlmctl by $((t1 - t0)) ms; the lock was free $((t2 - t0)) ms after dlmctl died (TTL 3 s: held until it lapsed)"
((t1 - t0 < 1000)) || fail "SIGKILL: the command outlived dlmctl"

# --kill-after is honoured, within what the lease leaves (a quarter of the
# TTL less the keep-alive's loss margin, a tenth of it): more is refused.
status=0
"${dl[@]}" exec --lock lock.lost --ttl 6 --kill-after 5 -- true 2>"$dir/refused.err" || status=$?
[ "$status" = 2 ] || fail "--kill-after 5 with --ttl 6: exit status $status, wanted 2"
grep -q -- "--kill-after 5 is more than a lease of --ttl 6 leaves (at most 0.9 s" "$dir/refused.err" ||
  fail "the refusal of --kill-after 5 does not name the most: $(cat "$dir/refused.err")"

# term_at NAME: a command script that ignores SIGTERM but notes when it came
# (the time in $dir/NAME.term).
term_at() { echo "trap 'date +%s%3N > $dir/$1.term' TERM; while :; do sleep 0.05; done"; }

# Lost lock, the command ignoring SIGTERM: force-released by the operator;
# the keep-alive (renewal every 4 s for a 12 s TTL) finds it lost, the group
# gets SIGTERM (ignored), then SIGKILL after --kill-after 1.5 s, honoured
# (more than the keep-alive's own margin leaves: exec watches the lease). A
# second exec takes the lock meanwhile.
start_holder lost lock.lost --ttl 12 --kill-after 1.5 -- "$(term_at lost)"
"${dl[@]}" release --force lock.lost >/dev/null
t0=$(now_ms)
"${dl[@]}" exec --lock lock.lost --ttl 30 -- sh -c "echo \$\$ > $dir/next.pid; sleep 30" 2>/dev/null &
next=$!
status=0
wait "$holder" || status=$?
t1=$(now_ms)
wait_for 2000 not_alive "$child" || fail "lost: the command still runs 2 s after dlmctl ended"
t2=$(now_ms)
[ -s "$dir/lost.term" ] || fail "lost: the command got no SIGTERM: $(cat "$dir/lost.err")"
term=$(cat "$dir/lost.term")
echo "lost lock: dlmctl ended $((t1 - t0)) ms after the force-release (status $status), $((t1 - term)) ms after SIGTERM (--kill-after 1.5); the command outlived it by $((t2 - t1)) ms"
[ "$status" = 76 ] || fail "lost: dlmctl exited $status, wanted 76"
grep -q 'its status: 137' "$dir/lost.err" || fail "lost: the command was not SIGKILLed: $(cat "$dir/lost.err")"
grep -q "the lock DC#default#[^#]*#lock.lost (EXCLUSIVE) was lost; stopping the command (SIGTERM, SIGKILL in 1.5 s); its last confirmed lease ends at [0-9-]*T[0-9:.]*Z (in [0-9.]* m\?s)$" "$dir/lost.err" ||
  fail "lost: the loss is not reported in human units: $(cat "$dir/lost.err")"
((t1 - term >= 1400 && t1 - term < 3000)) || fail "lost: SIGKILL came $((t1 - term)) ms after SIGTERM, wanted --kill-after 1.5 s"
((t1 - t0 < 7000)) || fail "lost: the command ran on for $((t1 - t0)) ms without the lock"
kill -TERM "$next"
wait "$next" 2>/dev/null || true

# Lost lock by a stalled store (SQLite: another process holds the write lock,
# so renewals cannot commit): with --kill-after 1.2 s (the most an 8 s TTL
# leaves), exec itself finds the lease unconfirmed in time, sends SIGTERM
# --kill-after plus the loss margin before the lease could end, and the
# command ignoring SIGTERM is dead by SIGKILL before the lease ends.
stall_case=$db
command -v python3 >/dev/null || { stall_case=none; echo "stalled store: not run (no python3 to hold SQLite's write lock)"; }
case $stall_case in
  sqlite:*)
    start_holder stall lock.stall --ttl 8 --kill-after 1.2 -- "$(term_at stall)"
    python3 - "${db#sqlite:}" "$dir/stalled" <<'PY' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
time.sleep(11)
c.execute("ROLLBACK")
PY
    staller=$!
    wait_for 5000 test -e "$dir/stalled" || fail "stall: the write lock was not taken"
    t0=$(now_ms)
    wait_for 10000 not_alive "$child" || fail "stall: the command still runs 10 s into the stall"
    t1=$(now_ms)
    # "its last confirmed lease ends at 2026-11-27T13:44:17.810Z (in 580 ms)":
    # an instant and a duration in human units, never epoch milliseconds.
    end=$(sed -n 's/.*was not renewed in time for --kill-after; .*lease ends at \([0-9-]*T[0-9:.]*Z\) (in [0-9.]* m\?s)$/\1/p' "$dir/stall.err")
    [ -n "$end" ] || fail "stall: no stop reported, or not in ISO 8601 and human units: $(cat "$dir/stall.err")"
    end=$(date -u -d "$end" +%s%3N)
    term=$(cat "$dir/stall.term" 2>/dev/null) || fail "stall: the command got no SIGTERM"
    echo "stalled store: SIGTERM $((term - t0)) ms into the stall, the command killed $((t1 - term)) ms later (--kill-after 1.2), $((end - t1)) ms before its lease ended"
    ((t1 < end)) || fail "stall: the command outlived its lease by $((t1 - end)) ms"
    ((t1 - term >= 1100)) || fail "stall: SIGKILL came $((t1 - term)) ms after SIGTERM, wanted --kill-after 1.2 s"
    status=0
    wait "$holder" || status=$?
    [ "$status" = 76 ] || fail "stall: dlmctl exited $status, wanted 76"
    grep -q "the lease of the lock DC#default#[^#]*#lock.stall (EXCLUSIVE) was not renewed in time; the command was stopped (its status: 137)" "$dir/stall.err" ||
      fail "stall: $(cat "$dir/stall.err")"
    wait "$staller"
    ;;
esac

# Exit statuses are the command's, as a shell reports them.
check_status() {
  local want=$1 status=0
  shift
  "${dl[@]}" exec --lock codes -- "$@" 2>/dev/null || status=$?
  echo "exit status of '$*': $status"
  [ "$status" = "$want" ] || fail "'$*' gave $status, wanted $want"
}
check_status 0 true
check_status 7 sh -c 'exit 7'
check_status 138 sh -c 'kill -USR1 $$'
check_status 127 /nonexistent/cmd
check_status 126 "$dir"
is_free codes || fail "a lock kept after its command ended"

# A lock held elsewhere: -n gives 75, or the -E code, and names the holder;
# the command does not run; -w waits that long (fractional) before giving up.
start_holder held held.lock --ttl 30 -- "exec sleep 30"
status=0
"${dl[@]}" exec -n --lock held.lock -- touch "$dir/ran" 2>"$dir/conflict.err" || status=$?
[ "$status" = 75 ] || fail "held: exit status $status, wanted 75"
grep -q "is held EXCLUSIVE by owner [0-9a-f-]* (host $(hostname), pid $holder.*since [0-9-]*T[0-9:.]*Z, expires [0-9-]*T[0-9:.]*Z; not running the command" "$dir/conflict.err" ||
  fail "the conflict message does not name the holder (pid $holder): $(cat "$dir/conflict.err")"
status=0
"${dl[@]}" exec -n -E 3 --lock held.lock -- touch "$dir/ran" 2>/dev/null || status=$?
[ "$status" = 3 ] || fail "held -E 3: exit status $status, wanted 3"
t0=$(now_ms)
status=0
"${dl[@]}" exec -w 0.6 --lock held.lock -- touch "$dir/ran" 2>"$dir/w06.err" || status=$?
t1=$(now_ms)
[ "$status" = 75 ] || fail "held -w 0.6: exit status $status, wanted 75: $(cat "$dir/w06.err")"
((t1 - t0 >= 600 && t1 - t0 < 3000)) || fail "-w 0.6 gave up after $((t1 - t0)) ms"
echo "held elsewhere: 75, -E 3 gives 3, -w 0.6 gave up after $((t1 - t0)) ms"
[ ! -e "$dir/ran" ] || fail "a command ran while the lock was held elsewhere"
# SIGTERM during the wait: dlmctl stops waiting; the command never runs.
"${dl[@]}" exec -w 20 --lock held.lock -- touch "$dir/ran" 2>/dev/null &
waiter=$!
sleep 0.5
kill -TERM "$waiter"
t0=$(now_ms)
status=0
wait "$waiter" || status=$?
t1=$(now_ms)
echo "SIGTERM while waiting for the lock: exit $status after $((t1 - t0)) ms"
[ "$status" = 143 ] || fail "SIGTERM while waiting gave $status, wanted 143"
[ ! -e "$dir/ran" ] || fail "the command ran after SIGTERM during the wait"
kill -TERM "$holder"
wait "$holder" || true

# A process the command left behind in its group is the command too: the
# lock stays held until it ends.
t0=$(now_ms)
"${dl[@]}" exec --lock leftover -- sh -c "sleep 1 & echo \$! > $dir/bg.pid" 2>/dev/null &
exec_pid=$!
wait_for 5000 exists "$dir/bg.pid" || fail "leftover: the command did not start"
is_held leftover || fail "leftover: the lock was free while the command's background process ran"
wait "$exec_pid" || fail "leftover: dlmctl failed"
t1=$(now_ms)
! alive "$(cat "$dir/bg.pid")" || fail "leftover: dlmctl ended before the process the command left"
is_free leftover || fail "leftover: the lock was kept after everything ended"
echo "leftover background process (sleep 1): dlmctl ended after $((t1 - t0)) ms, then the lock was free"

# Options after the command word are the command's.
out=$("${dl[@]}" exec --lock args echo --db oops -n -- -h)
[ "$out" = "--db oops -n -- -h" ] || fail "the command got '$out'"
echo "PASS"

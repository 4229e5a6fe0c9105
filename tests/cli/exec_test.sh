#!/usr/bin/env bash
# dlmctl exec on a fresh database: the command runs under the lock with its
# fencing token, its exit status comes back, a second exec of the same lock
# does not run its command (75), and a lease shorter than the command is kept
# alive until the command ends; without -n, exec waits like flock(1);
# --shared commands run at the same time, an exclusive one waits for them.
# The command's status (1 of `false` included) is told apart from dlmctl's
# own: 76 the lock was lost, 69 not acquired for an error.
#
#   exec_test.sh DLMCTL [sqlite|postgres]
# sqlite (the default) on a temp file; postgres in a schema of its own on the
# server of the PG* variables.
set -euo pipefail
dlmctl=$1
kind=${2:-sqlite}
dir=$(mktemp -d)
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ "$kind" = postgres ]; then
  schema="dlm_cli_exec_$$"
  trap 'psql -qc "DROP SCHEMA IF EXISTS '"$schema"' CASCADE" >/dev/null 2>&1; rm -rf "$dir"' EXIT
  psql -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null ||
    fail "cannot reach PostgreSQL through PG* (psql failed)"
  db=(--db postgresql:// --schema "$schema")
else
  trap 'rm -rf "$dir"' EXIT
  db=(--db "sqlite:$dir/locks.sqlite")
fi

if [ "$kind" = sqlite ]; then
  # Like flock(1) and its lock file, exec creates a SQLite database that does
  # not exist, with its schema, and runs the command (two at once too); the
  # read-only commands still create nothing (dburl_test.sh).
  out=$("$dlmctl" --db "sqlite:$dir/fresh.sqlite" exec --lock first -- sh -c 'echo "$DLM_FENCING_TOKEN"' 2>"$dir/fresh.err") ||
    fail "exec on a new SQLite file failed: $(cat "$dir/fresh.err")"
  [ "$out" = 1 ] || fail "exec on a new SQLite file: the command printed '$out'"
  "$dlmctl" --db "sqlite:$dir/fresh.sqlite" schema status >/dev/null ||
    fail "exec left a database without its whole schema: $("$dlmctl" --db "sqlite:$dir/fresh.sqlite" schema status)"
  "$dlmctl" --db "sqlite:$dir/fresh2.sqlite" exec --lock a -- true 2>"$dir/fresh2a.err" &
  first=$!
  "$dlmctl" --db "sqlite:$dir/fresh2.sqlite" exec --lock b -- true 2>"$dir/fresh2b.err" ||
    fail "the second of two execs creating one file failed: $(cat "$dir/fresh2b.err")"
  wait "$first" || fail "the first of two execs creating one file failed: $(cat "$dir/fresh2a.err")"
  "$dlmctl" --db "sqlite:$dir/fresh2.sqlite" schema status >/dev/null ||
    fail "two execs left a database without its whole schema"
fi
"$dlmctl" "${db[@]}" migrate --client-role dlm_client --admin-role dlm_admin >/dev/null

out=$("$dlmctl" "${db[@]}" exec --lock jobs.import -- sh -c 'echo "$DLM_FENCING_TOKEN $DLM_LOCK_KEY"; exit 7') && status=0 || status=$?
[ "$status" = 7 ] || fail "exit status $status, wanted the command's 7"
[ "$out" = "1 DC#default#dlmctl#jobs.import" ] || fail "command saw '$out'"

# A 1 s lease held by a 3 s command: renewed, so a second exec in the middle
# is refused and does not run its command.
"$dlmctl" "${db[@]}" exec --lock jobs.import --ttl 1 -- sleep 3 &
holder=$!
sleep 2
status=0
"$dlmctl" "${db[@]}" exec -n --lock jobs.import -- touch "$dir/ran" 2>"$dir/second.err" || status=$?
[ "$status" = 75 ] || fail "second exec exit status $status, wanted 75"
# Why it did not run, after the database it was about.
head -1 "$dir/second.err" | grep -q "^dlmctl: database: " &&
  grep -q "^dlmctl: lock DC#default#dlmctl#jobs.import (EXCLUSIVE) is held EXCLUSIVE by owner .* since [0-9-]*T[0-9:.]*Z, expires [0-9-]*T[0-9:.]*Z; not running the command$" "$dir/second.err" ||
  fail "the refusal does not name the database and the holder: $(cat "$dir/second.err")"
# -q: the exit status says it, stderr stays empty (flock -n is silent too).
status=0
"$dlmctl" -q "${db[@]}" exec -n --lock jobs.import -- touch "$dir/ran" 2>"$dir/quiet.err" || status=$?
[ "$status" = 75 ] || fail "exec -q -n exit status $status, wanted 75"
[ ! -s "$dir/quiet.err" ] || fail "exec -q wrote on stderr: $(cat "$dir/quiet.err")"
[ ! -e "$dir/ran" ] || fail "the second command ran while the lock was held"
wait "$holder" || fail "the holder's exec failed"

# A --kill-after longer than the keep-alive's own margin leaves (exec then
# watches the lease itself) does not stop a command whose renewals come on
# time: 7 s under a 6 s lease renewed every 2 s.
out=$("$dlmctl" "${db[@]}" exec --lock jobs.long --ttl 6 --kill-after 0.6 -- sh -c 'sleep 7; echo done' 2>"$dir/long.err") ||
  fail "a command outliving its lease, renewed, was stopped: $(cat "$dir/long.err")"
[ "$out" = done ] || fail "the long command printed '$out'"

# Without -n or -w, exec waits like flock(1): a 1.5 s holder, then the
# waiter runs (-c: a shell command); --verbose says who held the lock and
# when it got it.
"$dlmctl" "${db[@]}" exec --lock jobs.wait -- sleep 1.5 &
holder=$!
sleep 0.5
out=$("$dlmctl" "${db[@]}" exec --verbose --lock jobs.wait -c 'echo "token $DLM_FENCING_TOKEN"' 2>"$dir/verbose.err") ||
  fail "the waiting exec failed: $(cat "$dir/verbose.err")"
[ "$out" = "token 2" ] || fail "the waiting exec printed '$out', wanted 'token 2'"
grep -q "waiting for lock DC#default#dlmctl#jobs.wait (EXCLUSIVE): held EXCLUSIVE by owner .*pid $holder) since [0-9-]*T[0-9:.]*Z" "$dir/verbose.err" ||
  fail "--verbose did not name the holder (pid $holder): $(cat "$dir/verbose.err")"
grep -q "acquired DC#default#dlmctl#jobs.wait (EXCLUSIVE) after [0-9.]* m\?s (fencing token 2)" "$dir/verbose.err" ||
  fail "--verbose did not report the acquisition: $(cat "$dir/verbose.err")"
wait "$holder" || fail "the first holder's exec failed"

# Released afterwards: the next exec runs (fencing token 3: third holder).
out=$("$dlmctl" "${db[@]}" exec --lock jobs.import -- sh -c 'echo "$DLM_FENCING_TOKEN"')
[ "$out" = 3 ] || fail "fencing token '$out', wanted 3"
# A command that cannot start is 127.
status=0
"$dlmctl" "${db[@]}" exec --lock jobs.import -- /nonexistent/cmd 2>/dev/null || status=$?
[ "$status" = 127 ] || fail "missing command gave $status, wanted 127"

# --- the command's status and dlmctl's own -----------------------------------
# The command's status comes back as it is, 1 included; dlmctl's own
# outcomes have codes of their own (docs/dlmctl.md): 76 the lock was lost,
# 69 the lock could not be taken for an error (the command did not run).
status=0
"$dlmctl" "${db[@]}" exec --lock jobs.false -- false 2>"$dir/false.err" || status=$?
[ "$status" = 1 ] || fail "exec -- false gave $status, wanted the command's 1"
[ ! -s "$dir/false.err" ] || fail "exec -- false said: $(cat "$dir/false.err")"
# Lost: force-released by the operator while the command runs (renewal
# every 0.5 s finds it lost); the command is stopped and exec says 76, not
# the command's status.
"$dlmctl" "${db[@]}" exec --lock jobs.lost --ttl 1.5 -- sleep 30 2>"$dir/lost.err" &
holder=$!
for _ in $(seq 100); do
  "$dlmctl" "${db[@]}" list --json 2>/dev/null | grep -q 'jobs.lost' && break
  sleep 0.1
done
"$dlmctl" "${db[@]}" release --force jobs.lost >/dev/null || fail "release --force jobs.lost failed"
status=0
wait "$holder" || status=$?
[ "$status" = 76 ] || fail "a lost lock gave $status, wanted 76: $(cat "$dir/lost.err")"
grep -q "the lock DC#default#dlmctl#jobs.lost (EXCLUSIVE) was lost while the command ran; the command was stopped (its status: 143)" "$dir/lost.err" ||
  fail "the loss was not reported: $(cat "$dir/lost.err")"
# Not acquired for an error: a database exec cannot use. The command does
# not run; 69, not 1.
if [ "$kind" = postgres ]; then
  broken=(--db postgresql:// --schema "dlm_cli_exec_missing_$$")
else
  broken=(--db "sqlite:$dir/no/such/dir/locks.sqlite")
fi
status=0
"$dlmctl" "${broken[@]}" exec --lock jobs.broken -- touch "$dir/ran.broken" 2>"$dir/broken.err" || status=$?
[ "$status" = 69 ] || fail "an unusable database gave $status, wanted 69: $(cat "$dir/broken.err")"
[ ! -e "$dir/ran.broken" ] || fail "the command ran without the lock"
grep -q "; not running the command \[[A-Z_]*\]$" "$dir/broken.err" ||
  fail "the failure does not say the command did not run: $(cat "$dir/broken.err")"

# --- shared: flock -s ---------------------------------------------------------
# Two shared holders of one key: each marks that it runs, then waits (10 s at
# most, else exit 3) to see the other's mark, so both commands ran at the
# same time under the lock; they end once $dir/go exists, marking done first.
reader() {
  "$dlmctl" "${db[@]}" exec "$2" --lock jobs.read -w 20 -- sh -c '
    d=$1; me=$2; other=$3
    touch "$d/in.$me"
    i=0; until [ -e "$d/in.$other" ]; do i=$((i+1)); [ $i -le 100 ] || { touch "$d/alone.$me"; exit 3; }; sleep 0.1; done
    i=0; until [ -e "$d/go" ]; do i=$((i+1)); [ $i -le 200 ] || exit 4; sleep 0.1; done
    touch "$d/done.$me"' sh "$dir" "$1" "$3" 2>"$dir/reader.$1.err"
}
reader A --shared B &
reader_a=$!
reader B -s A &
reader_b=$!
for _ in $(seq 100); do [ -e "$dir/in.A" ] && [ -e "$dir/in.B" ] && break; sleep 0.1; done
# Both marks, and both commands still running (neither gave up alone): they
# overlap now.
[ -e "$dir/in.A" ] && [ -e "$dir/in.B" ] && [ ! -e "$dir/alone.A" ] && [ ! -e "$dir/alone.B" ] &&
  kill -0 "$reader_a" 2>/dev/null && kill -0 "$reader_b" 2>/dev/null ||
  fail "two --shared execs did not run at the same time: $(cat "$dir"/reader.*.err)"
# A third shared one gets in at once; an exclusive one does not (75), and
# says that shared holders are in its way.
out=$("$dlmctl" "${db[@]}" exec -n -s --lock jobs.read -- sh -c 'echo "$DLM_FENCING_TOKEN"' 2>"$dir/third.err") ||
  fail "a third --shared exec -n was refused: $(cat "$dir/third.err")"
[ "$out" -ge 3 ] || fail "the third shared holder's fencing token is '$out'"
status=0
"$dlmctl" "${db[@]}" exec -n --lock jobs.read -- touch "$dir/ran.x" 2>"$dir/x.err" || status=$?
[ "$status" = 75 ] || fail "exclusive exec -n beside shared holders: exit status $status, wanted 75: $(cat "$dir/x.err")"
[ ! -e "$dir/ran.x" ] || fail "the exclusive command ran while shared holders held the lock"
grep -q "lock DC#default#dlmctl#jobs.read (EXCLUSIVE) is held SHARED by owner" "$dir/x.err" ||
  fail "the refusal does not name the shared holder: $(cat "$dir/x.err")"
# An exclusive exec that waits starts only after both readers ended.
"$dlmctl" "${db[@]}" exec -v -w 20 --lock jobs.read -- sh -c '
  if [ -e "$1/done.A" ] && [ -e "$1/done.B" ]; then echo after; else echo overlap; fi' sh "$dir" \
  >"$dir/x.out" 2>"$dir/x.verbose" &
writer=$!
for _ in $(seq 50); do grep -q "waiting for lock" "$dir/x.verbose" && break; sleep 0.1; done
grep -q "waiting for lock DC#default#dlmctl#jobs.read (EXCLUSIVE): held SHARED by owner" "$dir/x.verbose" ||
  fail "the waiting exclusive exec did not name a shared holder: $(cat "$dir/x.verbose")"
[ ! -s "$dir/x.out" ] || fail "the exclusive command started while shared holders ran: $(cat "$dir/x.out")"
touch "$dir/go"
wait "$reader_a" || fail "shared exec A failed: $(cat "$dir/reader.A.err")"
wait "$reader_b" || fail "shared exec B failed: $(cat "$dir/reader.B.err")"
wait "$writer" || fail "the waiting exclusive exec failed: $(cat "$dir/x.verbose")"
[ "$(cat "$dir/x.out")" = after ] || fail "the exclusive command overlapped the shared ones"
grep -q "acquired DC#default#dlmctl#jobs.read (EXCLUSIVE) after" "$dir/x.verbose" ||
  fail "--verbose did not report the exclusive acquisition: $(cat "$dir/x.verbose")"
echo "PASS"

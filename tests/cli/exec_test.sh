#!/usr/bin/env bash
# dlmctl exec on a temp SQLite file: the command runs under the lock with its
# fencing token, its exit status comes back, a second exec of the same lock
# does not run its command (75), and a lease shorter than the command is kept
# alive until the command ends; without -n, exec waits like flock(1).
set -euo pipefail
dlmctl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db="sqlite:$dir/locks.sqlite"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$dlmctl" --db "$db" migrate >/dev/null

out=$("$dlmctl" --db "$db" exec --lock jobs.import -- sh -c 'echo "$DLM_FENCING_TOKEN $DLM_LOCK_KEY"; exit 7') && status=0 || status=$?
[ "$status" = 7 ] || fail "exit status $status, wanted the command's 7"
[ "$out" = "1 DC#default#dlmctl#jobs.import" ] || fail "command saw '$out'"

# A 1 s lease held by a 3 s command: renewed, so a second exec in the middle
# is refused and does not run its command.
"$dlmctl" --db "$db" exec --lock jobs.import --ttl 1 -- sleep 3 &
holder=$!
sleep 2
status=0
"$dlmctl" --db "$db" exec -n --lock jobs.import -- touch "$dir/ran" 2>/dev/null || status=$?
[ "$status" = 75 ] || fail "second exec exit status $status, wanted 75"
[ ! -e "$dir/ran" ] || fail "the second command ran while the lock was held"
wait "$holder" || fail "the holder's exec failed"

# Without -n or -w, exec waits like flock(1): a 1.5 s holder, then the
# waiter runs (-c: a shell command); --verbose says who held the lock and
# when it got it.
"$dlmctl" --db "$db" exec --lock jobs.wait -- sleep 1.5 &
holder=$!
sleep 0.5
out=$("$dlmctl" --db "$db" exec --verbose --lock jobs.wait -c 'echo "token $DLM_FENCING_TOKEN"' 2>"$dir/verbose.err") ||
  fail "the waiting exec failed: $(cat "$dir/verbose.err")"
[ "$out" = "token 2" ] || fail "the waiting exec printed '$out', wanted 'token 2'"
grep -q "waiting for lock 'dlmctl#jobs.wait': held by owner .*pid $holder" "$dir/verbose.err" ||
  fail "--verbose did not name the holder (pid $holder): $(cat "$dir/verbose.err")"
grep -q "acquired 'dlmctl#jobs.wait' after [0-9.]* s (fencing token 2)" "$dir/verbose.err" ||
  fail "--verbose did not report the acquisition: $(cat "$dir/verbose.err")"
wait "$holder" || fail "the first holder's exec failed"

# Released afterwards: the next exec runs (fencing token 3: third holder).
out=$("$dlmctl" --db "$db" exec --lock jobs.import -- sh -c 'echo "$DLM_FENCING_TOKEN"')
[ "$out" = 3 ] || fail "fencing token '$out', wanted 3"
# A command that cannot start is 127.
status=0
"$dlmctl" --db "$db" exec --lock jobs.import -- /nonexistent/cmd 2>/dev/null || status=$?
[ "$status" = 127 ] || fail "missing command gave $status, wanted 127"
echo "PASS"

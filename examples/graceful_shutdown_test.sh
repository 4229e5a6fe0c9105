#!/usr/bin/env bash
# Starts graceful_shutdown, waits until one worker holds the lock and another
# waits for it (as its metrics, fetched over HTTP, say), sends SIGTERM and
# checks that it exits 0 within 5 seconds and left no lock held.
#
#   graceful_shutdown_test.sh DATABASE_URL GRACEFUL_SHUTDOWN
# DLMCTL (run_example.sh exports it) lists the locks afterwards.
set -euo pipefail
url=$1
program=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v curl >/dev/null || fail "curl is missing"
out=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
# True while process $1 runs (a child that exited is a zombie until waited).
running() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]
}

"$program" "$url" 0 2 >"$out/stdout" 2>"$out/stderr" &
pid=$!

# The port it chose, then metrics showing a holder and a waiter.
port=
metrics=
for _ in $(seq 1 100); do
  running "$pid" || fail "it exited early: $(cat "$out/stdout" "$out/stderr")"
  port=${port:-$(sed -n 's|^metrics: http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$out/stdout")}
  if [ -n "$port" ]; then
    metrics=$(curl -sf --max-time 2 "http://127.0.0.1:$port/metrics" || true)
    if grep -q '^dlm_acquisitions_total{client="compactor"} 1$' <<<"$metrics" &&
       grep -q '^dlm_waits_total{client="compactor"} 1$' <<<"$metrics"; then
      break
    fi
  fi
  sleep 0.1
done
grep -q '^dlm_waits_total{client="compactor"} 1$' <<<"$metrics" ||
  fail "no holder and waiter seen in the metrics: $metrics $(cat "$out/stdout" "$out/stderr")"
grep -q ' WAITING ' "$out/stderr" || fail "no WAITING event in the log: $(cat "$out/stderr")"
echo "metrics on port $port show one holder and one waiter"

start=$(date +%s%N)
kill -TERM "$pid"
for _ in $(seq 1 50); do
  running "$pid" || break
  sleep 0.1
done
! running "$pid" || fail "still running 5 s after SIGTERM"
status=0
wait "$pid" || status=$?
pid=
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
cat "$out/stdout"
[ "$status" = 0 ] || fail "exit status $status: $(cat "$out/stderr")"
grep -q 'released jobs.compactor' "$out/stdout" || fail "the held lock was not released"
echo "exited 0 in $elapsed_ms ms after SIGTERM"

held=$("$DLMCTL" --db "$url" list --json)
if grep -q compactor <<<"$held"; then fail "a lock is still held: $held"; fi
echo "OK: no lock left held"

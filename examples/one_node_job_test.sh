#!/usr/bin/env bash
# Starts N copies of one_node_job at once on one database and checks that
# exactly one ran the job and the others skipped it, then that the lock was
# released (one more copy runs it).
#
#   one_node_job_test.sh DATABASE_URL ONE_NODE_JOB [N]
set -euo pipefail
url=$1
program=$2
n=${3:-4}
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

pids=()
for i in $(seq 1 "$n"); do
  "$program" "$url" "node$i" 3 >"$out/node$i" 2>&1 &
  pids+=($!)
done
for i in $(seq 1 "$n"); do
  wait "${pids[$((i - 1))]}" || fail "node$i exited with $?: $(cat "$out/node$i")"
done
cat "$out"/node*
ran=$(cat "$out"/node* | grep -c ': running the import' || true)
skipped=$(cat "$out"/node* | grep -c ': skipped: ' || true)
[ "$ran" = 1 ] || fail "$ran nodes ran the job, wanted exactly 1"
[ "$skipped" = $((n - 1)) ] || fail "$skipped nodes skipped, wanted $((n - 1))"

# Released when the job ended: the next run gets it.
"$program" "$url" "later" 0 | tee "$out/later"
grep -q '^later: running the import' "$out/later" || fail "the lock was not released"
echo "OK: 1 of $n nodes ran the job"

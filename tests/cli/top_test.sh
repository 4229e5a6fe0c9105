#!/usr/bin/env bash
# dlmctl top as a script reads it: with a holder of "a" and requests waiting
# for "a" (blocked by the hold of the same key) and "a.b" (blocked by its
# ancestor), a holder of "c.d", a request for "c" (blocked by that
# descendant) and a later one for "c.e" (no hold in its way: queued behind
# the request for "c"), `top --once` names each hold with its holder's pid
# and each waiter with what blocks it, without terminal control codes;
# `--once --json` parsed with jq says the same; --prefix shows only its
# keys (the blocker of "c.e" is still found). The live view on a pipe prints
# frames separated by blank lines and exits 0 on SIGTERM. Once the holders
# are killed, every waiter runs and top shows nothing held and nobody
# waiting. An expired hold beside a live one: top and list both count two
# holds, one of them expired (one definition, hold_summary.h).
#
#   top_test.sh DLMCTL sqlite|postgres
# postgres takes the server from the PG* variables and fails without one.
set -euo pipefail
dlmctl=$1
kind=$2
dir=$(mktemp -d)
schema=""
cleanup() {
  kill -TERM $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  [ -z "$schema" ] || psql -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || fail "jq is missing (scripts/test.sh installs it)"

if [ "$kind" = sqlite ]; then
  db=(--db "sqlite:$dir/locks.sqlite")
else
  [[ -n ${PGHOST:-}${PGDATABASE:-}${PGSERVICE:-} ]] ||
    fail "no PostgreSQL server: set PGHOST/PGPORT/PGUSER/PGDATABASE (scripts/test.sh does)"
  schema="dlm_cli_top_$$"
  psql -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null || fail "psql failed"
  db=(--db postgresql:// --schema "$schema")
fi
"$dlmctl" "${db[@]}" migrate --client-role dlm_client --admin-role dlm_admin >/dev/null 2>&1 || fail "migrate failed"
top() { "$dlmctl" "${db[@]}" top "$@" 2>/dev/null; }

# wait_for WHAT COMMAND...: COMMAND succeeds within 20 s, else FAIL.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  fail "timed out waiting for $what"
}
held_count() { [ "$("$dlmctl" "${db[@]}" list --json 2>/dev/null | jq length)" = "$1" ]; }
waiting_count() { [ "$("$dlmctl" "${db[@]}" waiters --json 2>/dev/null | jq length)" = "$1" ]; }

K=DC#default#dlmctl#
"$dlmctl" "${db[@]}" exec --lock a -- sleep 60 2>/dev/null &
holder_a=$!
"$dlmctl" "${db[@]}" exec --lock c.d -- sleep 60 2>/dev/null &
holder_cd=$!
wait_for "the two holders" held_count 2
"$dlmctl" "${db[@]}" exec --lock a -- true 2>/dev/null &
waiters=($!)
"$dlmctl" "${db[@]}" exec --lock a.b -- true 2>/dev/null &
waiters+=($!)
"$dlmctl" "${db[@]}" exec --lock c -- true 2>/dev/null &
waiters+=($!)
wait_for "three waiting requests" waiting_count 3
# Later than the request for "c", which fair queueing serves first.
"$dlmctl" "${db[@]}" exec --lock c.e -- true 2>/dev/null &
waiters+=($!)
wait_for "four waiting requests" waiting_count 4
host=$("$dlmctl" "${db[@]}" list --json 2>/dev/null | jq -r '.[0].host')
owner_c=$("$dlmctl" "${db[@]}" waiters --json 2>/dev/null |
  jq -r --arg k "${K}c" '.[] | select(.key == $k) | .owner')
[ -n "$owner_c" ] || fail "no request for ${K}c in dlmctl waiters"

# The table.
out=$(top --once) || fail "top --once failed"
echo "$out"
! grep -q $'\x1b' <<<"$out" || fail "top --once wrote terminal control codes"
head -1 <<<"$out" | grep -q "  2 holds on 2 keys; 4 waiting$" || fail "header: $(head -1 <<<"$out")"
# Keys by their one printed name, the canonical key (level, farm, client
# and id: what show, release and exec take back).
# held_row ID PID: the held table has the key of ID (DC, farm default,
# client dlmctl) with pid PID (the column headed PID*).
held_row() { awk -v k="$K$1" -v p="$2" '/^KEY / && !c { for (i = 1; i <= NF; i++) if ($i == "PID*") c = i }
  c && $1 == k && $2 == "EXCLUSIVE" && $c == p { f = 1 } END { exit !f }' <<<"$out"; }
held_row a "$holder_a" || fail "no held row for a with pid $holder_a"
held_row c.d "$holder_cd" || fail "no held row for c.d with pid $holder_cd"
# waiter_row ID TEXT: the waiter row of ID ends with TEXT (BLOCKED BY).
waiter_row() { grep -E "^$K$1 +EXCLUSIVE .*  $2\$" <<<"$out" >/dev/null; }
waiter_row a "this key held EXCLUSIVE by host $host pid $holder_a" ||
  fail "the waiter for a is not shown blocked by the hold of a"
waiter_row "a\\.b" "ancestor ${K}a held EXCLUSIVE by host $host pid $holder_a" ||
  fail "the waiter for a.b is not shown blocked by its ancestor a"
waiter_row c "descendant ${K}c\\.d held EXCLUSIVE by host $host pid $holder_cd" ||
  fail "the waiter for c is not shown blocked by its descendant c.d"
waiter_row "c\\.e" "queued behind $owner_c \\(EXCLUSIVE on ancestor ${K}c, waiting .*\\)" ||
  fail "the waiter for c.e is not shown queued behind the request for c"

# list's WAITERS: the requests each hold keeps waiting, on its key, an
# ancestor or a descendant: a blocks the requests for a and a.b; c.d blocks
# the one for c (its ancestor) but not the one for c.e (a sibling, queued
# behind c's request).
out=$("$dlmctl" "${db[@]}" list 2>/dev/null) || fail "list failed"
waiters_of() { awk -v k="$K$1" '$1 == k { print $NF }' <<<"$out"; }
[ "$(waiters_of a)" = 2 ] || fail "list's WAITERS of a is '$(waiters_of a)', wanted 2: $out"
[ "$(waiters_of c.d)" = 1 ] || fail "list's WAITERS of c.d is '$(waiters_of c.d)', wanted 1: $out"
"$dlmctl" "${db[@]}" list --json 2>/dev/null | jq -e --arg k "$K" '
  (map(select(.key == $k + "a")) | .[0].blocked_waiters == 2) and
  (map(select(.key == $k + "c.d")) | .[0].blocked_waiters == 1) and
  all(.[]; .level == "DC" and .farm == "default" and .client == "dlmctl")' >/dev/null ||
  fail "list --json blocked_waiters: $("$dlmctl" "${db[@]}" list --json 2>/dev/null)"

# The same as JSON.
json=$(top --once --json) || fail "top --once --json failed"
jq -e --arg k "$K" --argjson pa "$holder_a" --argjson pcd "$holder_cd" '
  (.held | length == 2) and
  (.held | map(select(.key == $k + "a" and .pid == $pa and .state == "held"
    and .id == "a" and .level == "DC" and .farm == "default" and .client == "dlmctl")) | length == 1) and
  (.held | map(select(.key == $k + "c.d" and .pid == $pcd)) | length == 1) and
  (.held | all(.held_ms >= 0 and .remaining_ms > 0 and .fencing_token > 0))' \
  <<<"$json" >/dev/null || fail "held in JSON: $json"
blocked_by() { jq -c --arg k "$K$1" '.waiters[] | select(.key == $k) | .blocked_by' <<<"$json"; }
[ "$(blocked_by a | jq -r '[.kind, .relation, .key, .pid, .host] | join(" ")')" = \
  "hold same_key ${K}a $holder_a $host" ] || fail "blocked_by of a: $(blocked_by a)"
[ "$(blocked_by a.b | jq -r '[.kind, .relation, .key, .pid] | join(" ")')" = \
  "hold ancestor ${K}a $holder_a" ] || fail "blocked_by of a.b: $(blocked_by a.b)"
[ "$(blocked_by c | jq -r '[.kind, .relation, .key, .pid] | join(" ")')" = \
  "hold descendant ${K}c.d $holder_cd" ] || fail "blocked_by of c: $(blocked_by c)"
[ "$(blocked_by c.e | jq -r '[.kind, .relation, .key, .owner] | join(" ")')" = \
  "queued ancestor ${K}c $owner_c" ] || fail "blocked_by of c.e: $(blocked_by c.e)"

# --prefix: only c's keys shown; c.e's blocker (the request for c) is found
# all the same, as is c's (c.d).
json=$(top --once --json --prefix "${K}c.") || fail "top --prefix failed"
jq -e --arg k "$K" '(.held | map(.key)) == [$k + "c.d"] and
  (.waiters | map(.key)) == [$k + "c.e"] and
  .waiters[0].blocked_by.kind == "queued" and .waiters[0].blocked_by.key == $k + "c"' \
  <<<"$json" >/dev/null || fail "top --prefix ${K}c.: $json"

# --json is for one frame.
status=0
"$dlmctl" "${db[@]}" top --json >/dev/null 2>&1 || status=$?
[ "$status" = 2 ] || fail "top --json without --once: exit status $status, wanted 2"

# The live view on a pipe: plain frames, a blank line between them, and
# SIGTERM ends it with status 0.
"$dlmctl" "${db[@]}" top --interval 0.2 >"$dir/live.out" 2>/dev/null &
live=$!
frames_at_least() { [ "$(grep -c '^dlmctl top ' "$dir/live.out")" -ge "$1" ]; }
wait_for "three frames of the live view" frames_at_least 3
kill -TERM "$live"
status=0
wait "$live" || status=$?
[ "$status" = 0 ] || fail "the live view ended with status $status on SIGTERM"
! grep -q $'\x1b' "$dir/live.out" || fail "the live view on a pipe wrote terminal control codes"
[ "$(grep -B1 '^dlmctl top ' "$dir/live.out" | grep -c '^$')" -ge 2 ] ||
  fail "frames are not separated by blank lines: $(cat "$dir/live.out")"

# The holders go; every waiter gets its lock in turn, runs `true` and ends.
kill -TERM "$holder_a" "$holder_cd"
for pid in "${waiters[@]}"; do
  wait_for "the waiter $pid to run and end" sh -c "! kill -0 $pid 2>/dev/null"
  wait "$pid" || fail "a waiter's exec failed"
done
wait_for "nothing held" held_count 0
out=$(top --once) || fail "top --once failed after the holders went"
echo "$out"
head -1 <<<"$out" | grep -q "  0 holds; 0 waiting$" || fail "header: $(head -1 <<<"$out")"
grep -qx "no held locks" <<<"$out" || fail "something still shown held"
grep -qx "no waiting requests" <<<"$out" || fail "a request still shown waiting"
[ "$(top --once --json | jq -c '[.held, .waiters]')" = "[[],[]]" ] ||
  fail "top --once --json still shows holds or waiters"

# An expired hold (its holder killed, nobody took the key) beside a live
# one: top and list show two rows and count them alike, one of them
# expired.
"$dlmctl" "${db[@]}" exec --ttl 1 --lock gone -- sleep 60 2>/dev/null &
gone=$!
wait_for "the holder of gone" held_count 1
kill -KILL "$gone"
wait "$gone" 2>/dev/null || true
"$dlmctl" "${db[@]}" exec --lock live -- sleep 60 2>/dev/null &
wait_for "the holder of live" held_count 2
expired_count() {
  [ "$("$dlmctl" "${db[@]}" list --json 2>/dev/null | jq '[.[] | select(.state == "expired")] | length')" = "$1" ]
}
wait_for "the hold of gone to expire" expired_count 1
out=$(top --once) || fail "top --once failed with an expired hold"
echo "$out"
head -1 <<<"$out" | grep -q "  2 holds on 2 keys, 1 of them expired; 0 waiting$" ||
  fail "top's header: $(head -1 <<<"$out")"
rows=$(awk '/^KEY / { n++ } n == 1 && !/^KEY / && NF { r++ } /^$/ && n { exit } END { print r + 0 }' <<<"$out")
[ "$rows" = 2 ] || fail "top shows $rows held rows, wanted 2: $out"
out=$("$dlmctl" "${db[@]}" list 2>/dev/null) || fail "list failed with an expired hold"
echo "$out"
tail -1 <<<"$out" | grep -q "^2 holds on 2 keys, 1 of them expired; 0 waiting requests" ||
  fail "list's count: $(tail -1 <<<"$out")"
echo "PASS"

#!/usr/bin/env bash
# dlmctl's admin commands on a real database, read back as a script would:
# schema status on an empty, an old, a current and a newer database (exit
# codes 3/3/0/4), migrate --dry-run and the migrations migrate lists; list,
# show and waiters with --json parsed back with jq (holders, waiters, a key
# with a newline in it), the same key escaped on one row of the table;
# shared holders one per row with their modes;
# release --force (0 when held, 1 when not).
#
#   admin_test.sh DLMCTL sqlite|postgres
# postgres takes the server from the PG* variables and fails without one.
set -euo pipefail
set -m
dlmctl=$1
kind=$2
here=$(cd "$(dirname "$0")" && pwd)
migrations=$here/../../migrations/$kind
dir=$(mktemp -d)
schemas=()
cleanup() {
  kill -TERM $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  for s in "${schemas[@]}"; do psql -qc "DROP SCHEMA $s CASCADE" >/dev/null 2>&1 || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || fail "jq is missing (scripts/test.sh installs it)"

# A fresh database of the kind under test; prints the dlmctl options naming it.
# new_db NAME
new_db() {
  if [ "$kind" = sqlite ]; then
    echo "--db sqlite:$dir/$1.sqlite"
  else
    local schema="dlm_cli_admin_$1_$$"
    psql -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null ||
      fail "cannot reach PostgreSQL through PG* (psql failed)"
    echo "--db postgresql:// --schema $schema"
  fi
}
# apply_v1 NAME: the first migration only, as a DBA would run it.
apply_v1() {
  local v1=("$migrations"/V1__*.sql)
  if [ "$kind" = sqlite ]; then
    { echo "BEGIN;"; cat "${v1[0]}"; echo "COMMIT;"; } | sqlite3 "$dir/$1.sqlite"
  else
    PGOPTIONS="-c search_path=dlm_cli_admin_$1_$$" psql -v ON_ERROR_STOP=1 -q -1 -f "${v1[0]}" >/dev/null
  fi
}
# db_sql NAME SQL: runs SQL on database NAME (made by new_db) as its owner.
db_sql() {
  if [ "$kind" = sqlite ]; then
    sqlite3 "$dir/$1.sqlite" "$2"
  else
    PGOPTIONS="-c search_path=dlm_cli_admin_$1_$$" psql -v ON_ERROR_STOP=1 -qc "$2"
  fi
}
# run [dlmctl args...]: sets out, err, status.
run() {
  status=0
  out=$("$dlmctl" "$@" 2>"$dir/err") || status=$?
  err=$(cat "$dir/err")
}
expect_status() { [ "$status" = "$1" ] || fail "$2: exit status $status, wanted $1; stdout: $out; stderr: $err"; }

if [ "$kind" = postgres ]; then
  [[ -n ${PGHOST:-}${PGDATABASE:-}${PGSERVICE:-} ]] ||
    fail "no PostgreSQL server: set PGHOST/PGPORT/PGUSER/PGDATABASE (scripts/test.sh does)"
  schemas=("dlm_cli_admin_empty_$$" "dlm_cli_admin_old_$$" "dlm_cli_admin_cur_$$" "dlm_cli_admin_new_$$" "dlm_cli_admin_newok_$$")
fi
needed=$("$dlmctl" --version | sed -n 's/.*PostgreSQL \([0-9]*\), SQLite \([0-9]*\).*/\1 \2/p')
[ "$kind" = sqlite ] && needed=${needed#* } || needed=${needed% *}
[ -n "$needed" ] || fail "--version does not say which schema version is needed"
mapfile -t all_files < <(cd "$migrations" && ls V*__*.sql | sort -t_ -k1.2n)

# --- schema status and migrate -------------------------------------------
read -ra empty <<<"$(new_db empty)"
run "${empty[@]}" schema status
expect_status 3 "schema status on an empty database"
[[ $out == *"version found:  none (no dlm schema)"* ]] || fail "empty: $out"
[[ $out == *"version needed: $needed "* ]] || fail "empty: needed version missing: $out"
for f in "${all_files[@]}"; do [[ $out == *"  $f"* ]] || fail "empty: $f not listed as pending: $out"; done
run "${empty[@]}" migrate --dry-run
expect_status 0 "migrate --dry-run on an empty database"
[ "$(grep -c '^would apply ' <<<"$out")" = "${#all_files[@]}" ] || fail "dry run listed: $out"
if [ "$kind" = sqlite ]; then
  [ ! -e "$dir/empty.sqlite" ] || fail "schema status or migrate --dry-run created the database file"
fi
run "${empty[@]}" schema status
expect_status 3 "schema status after a dry run"

read -ra old <<<"$(new_db old)"
apply_v1 old
run "${old[@]}" schema status
expect_status 3 "schema status on a version-1 database"
[[ $out == *"version found:  1"* ]] || fail "old: $out"
[[ $out == *"${all_files[0]%%__*}"* || $out == *"create lock tables"* ]] || fail "old: applied V1 not listed: $out"
for f in "${all_files[@]:1}"; do [[ $out == *"  $f"* ]] || fail "old: $f not pending: $out"; done
# The roles a first migration (V3) grants to are named, never made up
# (ignored by SQLite, which has no roles).
roles=(--client-role dlm_client --admin-role dlm_admin)
run "${old[@]}" migrate "${roles[@]}"
expect_status 0 "migrate from version 1"
[ "$(grep -c '^applied V' <<<"$out")" = $((${#all_files[@]} - 1)) ] || fail "migrate from 1 listed: $out"
[[ $out == *"applied V2 "* && $out != *"applied V1 "* ]] || fail "migrate from 1 listed: $out"
[[ $out == *"schema at version $needed" ]] || fail "migrate from 1 ended with: $out"
run "${old[@]}" schema status
expect_status 0 "schema status after migrate"
[[ $out == *"up to date"* ]] || fail "after migrate: $out"

read -ra cur <<<"$(new_db cur)"
if [ "$kind" = postgres ]; then
  run "${cur[@]}" migrate
  expect_status 2 "migrate of an empty database without role names"
  [[ $err == *"has no dlm roles yet; name the applications' and the operators' roles: dlmctl migrate --client-role ROLE --admin-role ROLE"* ]] ||
    fail "migrate without role names said: $err"
  run "${cur[@]}" schema status
  expect_status 3 "schema status after the refused migrate"
  run "${cur[@]}" migrate --client-role dlm_client
  expect_status 2 "migrate with one role named"
fi
run "${cur[@]}" migrate "${roles[@]}"
expect_status 0 "migrate of an empty database"
[ "$(grep -c '^applied V' <<<"$out")" = "${#all_files[@]}" ] || fail "migrate listed: $out"
run "${cur[@]}" migrate
expect_status 0 "migrate of a current database"
! grep -q '^applied' <<<"$out" || fail "a second migrate applied something: $out"
run "${cur[@]}" schema status
expect_status 0 "schema status on a current database"

read -ra new <<<"$(new_db new)"
run "${new[@]}" migrate "${roles[@]}"
db_sql new "INSERT INTO dlm_schema_version (version, description) VALUES (99, 'from the future')"
run "${new[@]}" schema status
expect_status 4 "schema status on a newer database"
[[ $out == *"newer than this build"*"no longer serves it"* ]] || fail "newer: $out"
# A newer schema whose compatible_from still serves this build is usable
# (the rolling-upgrade rule): 0, as the help says, and the commands work.
read -ra newok <<<"$(new_db newok)"
run "${newok[@]}" migrate "${roles[@]}"
db_sql newok "INSERT INTO dlm_schema_version (version, description, compatible_from) VALUES (99, 'from the future, compatible', $needed)"
run "${newok[@]}" schema status
expect_status 0 "schema status on a newer database that still serves this build"
[[ $out == *"usable: the database is newer than this build"*"still serves it"* ]] || fail "newer but compatible: $out"
run "${newok[@]}" exec -n --lock compat.check -- true
expect_status 0 "exec on a newer database that still serves this build"
db_sql newok "UPDATE dlm_schema_version SET compatible_from = $((needed + 1)) WHERE version = 99"
run "${newok[@]}" schema status
expect_status 4 "schema status on a newer database whose compatible_from is above this build"
echo "schema status: empty 3, version 1 3, current 0, newer 4 (0 while its compatible_from serves this build); migrate lists what it applied"

# --- list, show, waiters ----------------------------------------------------
db=("${cur[@]}" --client "admin$$")
key=$'jobs.a\nb'
store_key="DC#default#admin$$#$key"
# until_length N ARGS...: runs dlmctl ARGS on $db until its JSON array has N
# elements (5 s at most; status 1 then).
until_length() {
  local n=$1
  shift
  for _ in $(seq 100); do
    run "${db[@]}" "$@"
    [ "$(jq length <<<"$out")" = "$n" ] && return 0
    sleep 0.05
  done
  return 1
}
"$dlmctl" "${db[@]}" exec --lock "$key" --ttl 60 -- sleep 60 2>/dev/null &
holder=$!
until_length 1 list --json || fail "list --json never showed the holder: $out"
# Two waiters: one for the key itself, one for its parent (which the held
# child blocks).
"$dlmctl" "${db[@]}" exec -w 30 --lock "$key" -- true 2>/dev/null &
waiter1=$!
"$dlmctl" "${db[@]}" exec -w 30 --lock jobs -- true 2>/dev/null &
waiter2=$!
until_length 2 waiters --json || fail "waiters --json did not show both waiters: $out"
[ "$(jq -r '[.[].key] | sort | join("|")' <<<"$out")" = "DC#default#admin$$#jobs|$store_key" ] ||
  fail "waiters --json keys: $out"
jq -e 'all(.[]; (.owner | test("^[0-9a-f-]{32,36}$")) and (.requested_at | test("Z$")) and .waited_ms >= 0)' <<<"$out" >/dev/null ||
  fail "waiters --json fields: $out"
# One request row for the whole wait: the same requested_at later, and an age
# that grew.
first=$out
sleep 0.6
run "${db[@]}" waiters --json
jq -e --argjson before "$first" '
  [.[].requested_at] == [$before[].requested_at]
  and ([.[].waited_ms] | min) >= ([$before[].waited_ms] | max) + 500' <<<"$out" >/dev/null ||
  fail "the waiters' request rows were not kept for the whole wait: before $first, after $out"
# DEADLINE is the waiter's own (-w 30: about 30 s after it began to wait),
# not its request row's lease (10 s at most, renewed), which is a field of
# its own.
jq -e 'def s: sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601;
  all(.[]; ((.deadline | s) - (.requested_at | s)) as $d | $d >= 29 and $d <= 31
    and ((.lease_expires_at | s) - (.requested_at | s)) <= 11)' <<<"$out" >/dev/null ||
  fail "waiters --json deadline is not the waiter's -w 30: $out"
deadline=$(jq -r --arg k "$store_key" '.[] | select(.key == $k) | .deadline' <<<"$out")
run "${db[@]}" waiters --prefix "$store_key"
expect_status 0 "waiters"
grep -q "^DC#default#admin$$#jobs.a\\\\nb  *EXCLUSIVE .* $deadline  *[0-9.]* s" <<<"$out" ||
  fail "the waiters table does not show the deadline $deadline and the lease: $out"

run "${db[@]}" list --json
expect_status 0 "list --json"
jq -e --arg k "$store_key" --argjson pid "$holder" '
  length == 1 and .[0].key == $k and .[0].state == "held" and .[0].pid == $pid
  and .[0].mode == "EXCLUSIVE"
  and .[0].fencing_token == 1 and .[0].ttl_ms == 60000 and .[0].remaining_ms > 0
  and (.[0].waiters | length) == 1 and (.[0].expires_at | test("^[0-9-]{10}T[0-9:.]{12}Z$"))
  and .[0].id == "jobs.a\nb" and .[0].level == "DC" and .[0].farm == "default" and .[0].client == "admin'$$'"
  and .[0].blocked_waiters == 2' <<<"$out" >/dev/null ||
  fail "list --json: $out"
if [ "$kind" = postgres ] && [ "${PGHOST:-}" = 127.0.0.1 ]; then
  [ "$(jq -r '.[0].ip' <<<"$out")" = 127.0.0.1 ] || fail "list --json ip: $out"
fi
run "${db[@]}" list --prefix "DC#default#admin$$#jobs.a"
expect_status 0 "list"
# One spelling of the key everywhere: the canonical key (level, farm,
# client, id), escaped, in the KEY column, as JSON's "key" has it.
[ "$(grep -c "^DC#default#admin$$#jobs.a\\\\nb  *EXCLUSIVE " <<<"$out")" = 1 ] || fail "the newline in the key is not escaped on one row of KEY: $out"
[ "$(wc -l <<<"$out")" = 3 ] || fail "list printed more rows than header, lock and summary: $out"
run "${db[@]}" list --prefix "DC#default#nobody" --json
[ "$out" = "[]" ] || fail "list --json of nothing: $out"

run "${db[@]}" show --json "$key"
expect_status 0 "show --json"
jq -e --arg k "$store_key" '.key == $k and .state == "held" and .mode == "EXCLUSIVE" and (.waiters | length) == 1
  and (.holders | length) == 1 and .holders[0].owner == .owner and .holders[0].mode == "EXCLUSIVE"' <<<"$out" >/dev/null ||
  fail "show --json: $out"
run "${db[@]}" show never.locked
expect_status 1 "show of a key never locked"

# The waiters go first (SIGTERM ends their wait at once), or one of them
# would take the lock the moment it is force-released.
kill -TERM "$waiter1" "$waiter2"
wait "$waiter1" "$waiter2" 2>/dev/null || true
run "${db[@]}" release --force "$key"
expect_status 0 "release --force of a held lock"
[[ $out == *"released (it was held)"* ]] || fail "release printed: $out"
run "${db[@]}" release --force "$key"
expect_status 1 "release --force of a free lock"
kill -TERM "$holder" 2>/dev/null || true
wait "$holder" 2>/dev/null || true

# A waiter without a deadline (exec without -w waits until it gets the
# lock): none recorded, shown as "-" and null.
"$dlmctl" "${db[@]}" exec --lock jobs.b -- sleep 60 2>/dev/null &
holder=$!
until_length 1 list --json --prefix "DC#default#admin$$#jobs.b" || fail "list --json never showed the holder of jobs.b: $out"
"$dlmctl" "${db[@]}" exec --lock jobs.b -- true 2>/dev/null &
waiter1=$!
until_length 1 waiters --json --prefix "DC#default#admin$$#jobs.b" || fail "waiters --json never showed the waiter for jobs.b: $out"
jq -e '.[0].deadline == null and (.[0].lease_expires_at | test("Z$"))' <<<"$out" >/dev/null ||
  fail "a waiter without a deadline: $out"
run "${db[@]}" waiters --prefix "DC#default#admin$$#jobs.b"
grep -q "^DC#default#admin$$#jobs.b  *EXCLUSIVE .*  -  *[0-9.]* s" <<<"$out" ||
  fail "the waiters table does not show '-' for no deadline: $out"
kill -TERM "$waiter1" "$holder"
wait "$waiter1" "$holder" 2>/dev/null || true
echo "list/show/waiters --json parsed back; release --force 0 then 1; waiters show each waiter's own deadline"

# Shared holders: one line (and one JSON object) per holder, each with its
# mode; show lists them all; waiters say the mode they ask for.
share="DC#default#admin$$#share.k"
"$dlmctl" "${db[@]}" exec -s --lock share.k -- sleep 60 2>/dev/null &
reader1=$!
"$dlmctl" "${db[@]}" exec --shared --lock share.k -- sleep 60 2>/dev/null &
reader2=$!
until_length 2 list --json --prefix "$share" || fail "list --json never showed two shared holders: $out"
jq -e --arg k "$share" --argjson p1 "$reader1" --argjson p2 "$reader2" '
  all(.[]; .key == $k and .mode == "SHARED" and .state == "held" and .remaining_ms > 0)
  and ([.[].pid] | sort) == ([$p1, $p2] | sort)
  and ([.[].owner] | unique | length) == 2
  and ([.[].fencing_token] | unique | length) == 2' <<<"$out" >/dev/null ||
  fail "list --json of two shared holders: $out"
run "${db[@]}" list --prefix "$share"
[ "$(grep -c "^DC#default#admin$$#share.k  *SHARED " <<<"$out")" = 2 ] || fail "list did not print two SHARED rows: $out"
[[ $out == *"2 holds on 1 key"* ]] || fail "list summary: $out"
# An exclusive waiter, and a shared one queued behind it (fair queueing).
"$dlmctl" "${db[@]}" exec -w 30 --lock share.k -- true 2>/dev/null &
writer=$!
until_length 1 waiters --json --prefix "$share" || fail "waiters --json never showed the exclusive waiter: $out"
"$dlmctl" "${db[@]}" exec -w 30 -s --lock share.k -- true 2>/dev/null &
reader3=$!
until_length 2 waiters --json --prefix "$share" || fail "waiters --json never showed both waiters: $out"
[ "$(jq -r '[.[].mode] | sort | join("|")' <<<"$out")" = "EXCLUSIVE|SHARED" ] || fail "waiters --json modes: $out"
# Each SHARED hold keeps only the EXCLUSIVE request waiting (SHARED
# conflicts only with EXCLUSIVE): WAITERS 1 on each row, not 2.
run "${db[@]}" list --prefix "$share"
[ "$(grep -c "^DC#default#admin$$#share.k  *SHARED .*  1$" <<<"$out")" = 2 ] ||
  fail "list's WAITERS of the shared holds is not 1 each: $out"
run "${db[@]}" show --json share.k
expect_status 0 "show --json of a shared key"
jq -e --arg k "$share" '
  .key == $k and .mode == "SHARED" and .state == "held" and (.waiters | length) == 2
  and (.holders | length) == 2 and all(.holders[]; .mode == "SHARED" and .state == "held")
  and ([.holders[].owner] | unique | length) == 2' <<<"$out" >/dev/null ||
  fail "show --json of two shared holders: $out"
run "${db[@]}" show share.k
expect_status 0 "show of a shared key"
[[ $out == *"HELD by 2 holders, 2 of them live"* ]] || fail "show state: $out"
[ "$(grep -c "^SHARED  *[0-9a-f-]\{32,36\} " <<<"$out")" = 2 ] || fail "show did not list both holders: $out"
grep -q "^DC#default#admin$$#share.k  *EXCLUSIVE " <<<"$out" || fail "show's waiters table has no EXCLUSIVE row: $out"
grep -q "^id  *share.k$" <<<"$out" && grep -q "^client  *admin$$$" <<<"$out" ||
  fail "show does not name the key by its id and client: $out"
kill -TERM "$writer" "$reader3"
wait "$writer" "$reader3" 2>/dev/null || true
kill -TERM "$reader1" "$reader2"
wait "$reader1" "$reader2" 2>/dev/null || true
echo "shared holders: list/show one row per holder with its mode; waiters show modes"

# Drift: an applied migration whose recorded checksum differs from this
# build's file.
run "${cur[@]}" schema status
[[ $out == *" ok "* ]] || fail "schema status shows no verified checksum: $out"
# (V1 and V2 of a PostgreSQL database carry no checksum: V3 added the column.)
db_sql cur "UPDATE dlm_schema_version SET checksum = 1 WHERE version = $([ "$kind" = sqlite ] && echo 1 || echo 3)"
run "${cur[@]}" schema status
expect_status 5 "schema status with a changed checksum"
[[ $out == *"DRIFT"* ]] || fail "drift not reported: $out"
echo "schema status: checksums ok, a changed one is DRIFT (exit 5)"

# PostgreSQL: dlmctl as the application role and as the admin role.
if [ "$kind" = postgres ]; then
  app="dlm_cli_app_$$"
  ops="dlm_cli_ops_$$"
  psql -v ON_ERROR_STOP=1 -qc "CREATE ROLE $app LOGIN IN ROLE dlm_client; CREATE ROLE $ops LOGIN IN ROLE dlm_admin" >/dev/null
  trap 'psql -qc "DROP ROLE IF EXISTS '"$app"'; DROP ROLE IF EXISTS '"$ops"'" >/dev/null 2>&1; cleanup' EXIT
  as_app=(--db "postgresql://$app@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/${PGDATABASE:-postgres}" --schema "dlm_cli_admin_cur_$$" --client "admin$$")
  as_ops=(--db "postgresql://$ops@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/${PGDATABASE:-postgres}" --schema "dlm_cli_admin_cur_$$" --client "admin$$")
  # The client id was bound to the login that used it first (the tests'
  # superuser); the DBA gives it to the application's role.
  db_sql cur "SELECT dlm_bind_client('admin$$', '$app')"
  out=$("$dlmctl" "${as_app[@]}" exec -n --lock role.check -- sh -c 'echo "$DLM_FENCING_TOKEN"' 2>"$dir/err") ||
    fail "exec as the application role: $(cat "$dir/err")"
  "$dlmctl" "${as_app[@]}" exec --lock role.held -- sleep 30 2>/dev/null &
  held=$!
  until_length 1 list --json --prefix "DC#default#admin$$#role.held" || true
  run "${as_app[@]}" list --json
  expect_status 0 "list as the application role"
  jq -e 'length >= 1 and all(.[]; has("token") | not)' <<<"$out" >/dev/null || fail "list as the application role: $out"
  run "${as_app[@]}" release --force role.held
  expect_status 77 "release --force as the application role"
  [[ $err == *"permission denied"* && $err == *"[PERMISSION_DENIED]"* ]] ||
    fail "release --force as the application role said: $err"
  run "${as_app[@]}" purge --idle-for 1s
  expect_status 77 "purge as the application role"
  run "${as_ops[@]}" release --force role.held
  expect_status 0 "release --force as the admin role"
  run "${as_ops[@]}" purge --idle-for 1h --dry-run
  expect_status 0 "purge --dry-run as the admin role"
  kill -TERM "$held" 2>/dev/null || true
  wait "$held" 2>/dev/null || true
  echo "as the application role: exec and list work, release --force and purge are refused; as the admin role both work"
fi
echo "PASS"

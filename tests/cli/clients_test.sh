#!/usr/bin/env bash
# dlmctl waiters cancel and clients on a real database.
#
# waiters cancel: a waiter that crashed (SIGKILL) leaves its request row,
# which fair queueing serves first until its lease ends, so once the holder is gone `exec -n`
# still finds the lock taken (75); `waiters cancel KEY --owner OWNER` (the
# owner as `waiters --json` shows it) removes it (0; 1 for an owner that
# does not wait) and `exec -n` runs; `--all` with nothing left is 1.
#
# PostgreSQL only: clients. An admin login binds a clientId to a service's
# role (`clients bind`), `clients` and `clients --json` show it (how, by
# whom, and the hierarchy its first acquire records); a login outside the
# role gets PERMISSION_DENIED (77) under it; an unbound clientId is bound to
# the first login that uses it, and the exec that bound it prints one line
# on stderr saying so (`dlmctl: warning: dlm: client "C" was bound at first
# use ...`; no later exec, nor one under an admin's binding, prints it);
# `clients unbind` (0, then 1) lets the next login have it; binding a missing role or a clientId with '#' is 1
# (INVALID_ARGUMENT); an application login may list but not bind, unbind or
# cancel (77); dlmctl's own clientId "dlmctl", bound by its first use to
# the first login that used it, is shared by two operators once bound to
# their group role.
# SQLite: the client commands fail with INVALID_ARGUMENT (no roles).
#
#   clients_test.sh DLMCTL sqlite|postgres
# postgres takes the server from the PG* variables and fails without one.
set -euo pipefail
dlmctl=$1
kind=$2
dir=$(mktemp -d)
schema=""
roles=()
cleanup() {
  # Stopped jobs first get going again, or they would not see the TERM.
  kill -CONT $(jobs -p) 2>/dev/null || true
  kill -TERM $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -n "$schema" ]; then
    psql -qc "DROP SCHEMA $schema CASCADE" >/dev/null 2>&1 || true
    for r in "${roles[@]}"; do psql -qc "DROP ROLE IF EXISTS $r" >/dev/null 2>&1 || true; done
  fi
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
  schema="dlm_cli_clients_$$"
  psql -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null ||
    fail "cannot reach PostgreSQL through PG* (psql failed)"
  db=(--db postgresql:// --schema "$schema")
fi
"$dlmctl" "${db[@]}" migrate >/dev/null 2>&1 || fail "migrate failed"

# run [dlmctl args...] on $db: sets out, err, status.
run() {
  status=0
  out=$("$dlmctl" "${db[@]}" "$@" 2>"$dir/err") || status=$?
  err=$(cat "$dir/err")
}
expect_status() { [ "$status" = "$1" ] || fail "$2: exit status $status, wanted $1; stdout: $out; stderr: $err"; }
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

# --- waiters cancel -----------------------------------------------------------
"$dlmctl" "${db[@]}" exec --lock stuck.k -- sleep 60 2>/dev/null &
holder=$!
wait_for "the holder" held_count 1
"$dlmctl" "${db[@]}" exec -w 40 --lock stuck.k -- true 2>/dev/null &
waiter=$!
wait_for "the waiter's request" waiting_count 1
# Crashed from now on: its request, just recorded, counts for 10 s more
# (kRequestLease) without renewals; the steps up to the cancel take far less.
# (SIGKILL, not SIGSTOP: a process stopped inside a SQLite transaction would
# keep the file's write lock.)
kill -KILL "$waiter"
kill -TERM "$holder"
wait "$holder" 2>/dev/null || true
wait_for "the holder's release" held_count 0
# Free, but the stuck waiter's request goes first.
run exec -n --lock stuck.k -- true
expect_status 75 "exec -n behind a stuck waiter's request"
run waiters --json
owner=$(jq -r '.[0].owner' <<<"$out")
[ "$(jq -r '.[0].key' <<<"$out")" = "DC#default#dlmctl#stuck.k" ] || fail "waiters --json: $out"
run waiters cancel stuck.k --owner "not-$owner"
expect_status 1 "waiters cancel of an owner that does not wait"
[[ $out == *"no waiting request of owner not-$owner; nothing cancelled"* ]] || fail "waiters cancel said: $out"
run waiters cancel --owner "$owner" stuck.k
expect_status 0 "waiters cancel of the stuck waiter"
[[ $out == "'stuck.k' (DC, farm default, client dlmctl): cancelled 1 waiting request of owner $owner" ]] ||
  fail "waiters cancel said: $out"
run waiters --json
[ "$out" = "[]" ] || fail "the cancelled request is still listed: $out"
run exec -n --lock stuck.k -- true
expect_status 0 "exec -n once the stuck request is cancelled"
wait "$waiter" 2>/dev/null || true
run waiters cancel --all stuck.k
expect_status 1 "waiters cancel --all with nobody waiting"
[[ $out == *"no waiting request; nothing cancelled"* ]] || fail "waiters cancel --all said: $out"
echo "waiters cancel: a stuck waiter's request removed by owner (0; 1 when none), the key then taken at once"

if [ "$kind" = sqlite ]; then
  for cmd in "clients" "clients bind svc svc_role" "clients unbind svc"; do
    read -ra words <<<"$cmd"
    run "${words[@]}"
    expect_status 1 "$cmd on SQLite"
    [[ $err == *"no roles"*"[INVALID_ARGUMENT]"* ]] || fail "$cmd on SQLite said: $err"
  done
  echo "clients, clients bind, clients unbind on SQLite: INVALID_ARGUMENT (no roles)"
  echo "PASS"
  exit 0
fi

# --- clients (PostgreSQL) ----------------------------------------------------
svc="dlm_cli_svc_$$"        # a service's login (its role)
other="dlm_cli_other_$$"    # another service's login
ops="dlm_cli_ops_$$"        # a DBA/operator with the admin role
group="dlm_cli_operators_$$" # a group role for operators' shared clientId
op1="dlm_cli_op1_$$"
op2="dlm_cli_op2_$$"
roles=("$op1" "$op2" "$group" "$ops" "$other" "$svc")
psql -v ON_ERROR_STOP=1 -qc "CREATE ROLE $svc LOGIN IN ROLE dlm_client;
  CREATE ROLE $other LOGIN IN ROLE dlm_client;
  CREATE ROLE $ops LOGIN IN ROLE dlm_admin;
  CREATE ROLE $group NOLOGIN;
  CREATE ROLE $op1 LOGIN IN ROLE dlm_client, $group;
  CREATE ROLE $op2 LOGIN IN ROLE dlm_client, $group" >/dev/null || fail "creating roles failed"
# as LOGIN [dlmctl args...]: sets out, err, status.
as() {
  local login=$1
  shift
  status=0
  out=$("$dlmctl" --db "postgresql://$login@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/${PGDATABASE:-postgres}" \
    --schema "$schema" "$@" 2>"$dir/err") || status=$?
  err=$(cat "$dir/err")
}
# binding CLIENT: the object of `clients --json` for CLIENT (null if none).
binding() {
  "$dlmctl" "${db[@]}" clients --json 2>/dev/null | jq -c --arg c "$1" 'map(select(.client_id == $c)) | .[0]'
}
orders="orders$$"
fresh="fresh$$"

as "$ops" clients bind "$orders" "$svc"
expect_status 0 "clients bind as the admin role"
[[ $out == "$orders: bound to role $svc" ]] || fail "clients bind said: $out"
b=$(binding "$orders")
jq -e --arg r "$svc" --arg by "$ops" '.role == $r and .first_use == false and .bound_by == $by
  and (.bound_at | test("^[0-9-]{10}T[0-9:.]{12}Z$")) and .hierarchy == null and .separator == null' <<<"$b" >/dev/null ||
  fail "clients --json after bind: $b"
as "$svc" exec -n --client "$orders" --lock jobs.a -- true
expect_status 0 "exec as the bound role"
[[ $err != *"bound at first use"* ]] || fail "exec under an admin's binding warned: $err"
b=$(binding "$orders")
jq -e '.hierarchy == true and .separator == "."' <<<"$b" >/dev/null || fail "the first acquire recorded no hierarchy: $b"
as "$other" exec -n --client "$orders" --lock jobs.b -- true
expect_status 77 "exec as a login outside the bound role"
[[ $err == *"[PERMISSION_DENIED]"* ]] || fail "exec outside the role said: $err"
run clients
expect_status 0 "clients"
grep -q "^$orders  *$svc  *admin  *$ops  *[0-9-]*T[0-9:.]*Z  *on, separator '.'$" <<<"$out" ||
  fail "clients did not show the admin binding on one row: $out"
echo "clients bind: the role's login locks, another login gets 77; clients shows how, by whom, the hierarchy"

# first_use_line LOGIN: the line of the exec that bound $fresh for LOGIN.
first_use_line() {
  echo "dlmctl: warning: dlm: client \"$fresh\" was bound at first use to role \"$1\" (login $1); "
}
# once LINE: $err holds LINE (a line's start) exactly once, naming the fix.
once() {
  [ "$(grep -cF -- "$1" <<<"$err")" = 1 ] && grep -F -- "$1" <<<"$err" | grep -qF "dlmctl clients bind"
}
# First use binds an unbound clientId to the login that uses it, and says so.
as "$other" exec -n --client "$fresh" --lock x -- true
expect_status 0 "exec under an unbound clientId"
once "$(first_use_line "$other")" || fail "the exec that bound $fresh did not say so once: $err"
as "$other" exec -n --client "$fresh" --lock y -- true
expect_status 0 "a second exec under the clientId it bound"
[[ $err != *"bound at first use"* ]] || fail "a later exec warned again: $err"
b=$(binding "$fresh")
jq -e --arg r "$other" '.role == $r and .first_use == true and .bound_by == $r' <<<"$b" >/dev/null ||
  fail "clients --json after a first use: $b"
as "$svc" exec -n --client "$fresh" --lock x -- true
expect_status 77 "exec under a clientId another login used first"
as "$ops" clients unbind "$fresh"
expect_status 0 "clients unbind of a bound clientId"
as "$ops" clients unbind "$fresh"
expect_status 1 "clients unbind of an unbound clientId"
[[ $out == *"was not bound"* ]] || fail "clients unbind said: $out"
[ "$(binding "$fresh")" = null ] || fail "still listed after unbind: $(binding "$fresh")"
as "$svc" exec -n --client "$fresh" --lock x -- true
expect_status 0 "exec under an unbound clientId after unbind"
once "$(first_use_line "$svc")" || fail "the exec that bound $fresh again did not say so once: $err"
jq -e --arg r "$svc" '.role == $r and .first_use == true' <<<"$(binding "$fresh")" >/dev/null ||
  fail "not bound again by first use: $(binding "$fresh")"
echo "first use binds (its exec prints one warning line, later ones none); clients unbind 0 then 1, and the next login's first use binds it again"

as "$ops" clients bind "nobody$$" "no_such_role_$$"
expect_status 1 "clients bind to a role that does not exist"
[[ $err == *"[INVALID_ARGUMENT]"* ]] || fail "clients bind to a missing role said: $err"
as "$ops" clients bind 'a#b' "$svc"
expect_status 1 "clients bind of a clientId with '#'"
[[ $err == *"[INVALID_ARGUMENT]"* ]] || fail "clients bind a#b said: $err"
as "$svc" clients --json
expect_status 0 "clients as an application login"
jq -e --arg c "$orders" 'any(.[]; .client_id == $c)' <<<"$out" >/dev/null || fail "clients as the application: $out"
as "$svc" clients bind "$orders" "$other"
expect_status 77 "clients bind as an application login"
as "$svc" clients unbind "$orders"
expect_status 77 "clients unbind as an application login"
as "$svc" waiters cancel --all stuck.k
expect_status 77 "waiters cancel as an application login"
echo "bind refuses a missing role and '#' (1); an application login lists (0) but may not bind, unbind or cancel (77)"

# dlmctl's own clientId: the first login that used it here (the PG* login,
# for the stuck waiter above) took it by first use; bound to the operators'
# group role, every member shares it.
jq -e --arg r "$(psql -XAtc 'SELECT session_user')" '.role == $r and .first_use == true
  and .hierarchy == true and .separator == "."' <<<"$(binding dlmctl)" >/dev/null ||
  fail "dlmctl was not bound by its first use: $(binding dlmctl)"
as "$op1" exec -n --lock ops.job -- true
expect_status 77 "an operator under dlmctl bound to another login"
as "$ops" clients bind dlmctl "$group"
expect_status 0 "clients bind dlmctl to the operators' group"
as "$op1" exec -n --lock ops.job -- true
expect_status 0 "the first operator once dlmctl is bound to the group"
as "$op2" exec -n --lock ops.job -- true
expect_status 0 "the second operator once dlmctl is bound to the group"
echo "dlmctl's clientId bound to a group role serves both operators"
echo "PASS"

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
# The remedy for a squatted clientId (schema 17): another login used it
# first and holds a key in it (a running exec) and waits for one (a forged
# request); `clients bind CLIENT ROLE --purge --json` reports 1 hold and 1
# request ended, the squatter's exec loses its lease (exit 1: its renewal
# is refused), the listing under the clientId is empty, the hierarchy
# setting is forgotten, and the service's `exec -n` runs at once. The login
# that made each hold and request: `list`, `show`, `waiters` and `top` show
# it to the admin login (a LOGIN column, "login" in JSON) and not to the
# service's own login (no column, "login": null). `clients unbind --purge`
# prints what it ended (text), then unbinds.
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
"$dlmctl" "${db[@]}" migrate --client-role dlm_client --admin-role dlm_admin >/dev/null 2>&1 || fail "migrate failed"

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
[[ $out == "DC#default#dlmctl#stuck.k: cancelled 1 waiting request of owner $owner" ]] ||
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

# --- clients bind --purge: the remedy for a squatted clientId ------------------
pay="pay$$"
prefix="DC#default#$pay#"
url() { echo "postgresql://$1@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/${PGDATABASE:-postgres}"; }
# as_bg LOG LOGIN [dlmctl args...]: in the background, stderr to $dir/LOG.
as_bg() {
  local log=$1 login=$2
  shift 2
  "$dlmctl" --db "$(url "$login")" --schema "$schema" "$@" 2>"$dir/$log" >/dev/null &
}
# count_under LOGIN WHAT N: `WHAT --json --prefix $prefix` as LOGIN has N rows.
count_under() {
  [ "$("$dlmctl" --db "$(url "$1")" --schema "$schema" "$2" --json --prefix "$prefix" 2>/dev/null | jq length)" = "$3" ]
}
# The squatter (another service's login) uses the name first: it holds a
# key (3 s leases, renewed each second) and has a request recorded for
# another (as psql would record one; nobody waits behind it, so nothing
# takes the key back while the admin acts).
as_bg squatter.err "$other" exec --client "$pay" --ttl 3 --lock ledger -- sleep 60
squatter=$!
wait_for "the squatter's hold" count_under "$ops" list 1
psql -v ON_ERROR_STOP=1 -q "$(url "$other")" -c "SET search_path = $schema" \
  -c "SELECT dlm_register_wait('${prefix}audit', '{}', '${prefix}audit.', '${prefix}audit/', 'squatter', 9000, false)" \
  >/dev/null || fail "the squatter's request was not recorded"
jq -e --arg r "$other" '.role == $r and .first_use == true' <<<"$(binding "$pay")" >/dev/null ||
  fail "the squatter's first use did not bind $pay: $(binding "$pay")"
as "$svc" exec -n --client "$pay" --lock ledger -- true
expect_status 77 "exec under the squatted clientId"

as "$ops" clients bind "$pay" "$svc" --purge --json
expect_status 0 "clients bind --purge --json"
jq -e --arg c "$pay" --arg r "$svc" '.client_id == $c and .role == $r
  and .purged == {"holds": 1, "shared_holds": 0, "requests": 1}' <<<"$out" >/dev/null ||
  fail "clients bind --purge --json said: $out"
squat_status=0
wait "$squatter" || squat_status=$?
[ "$squat_status" = 76 ] || fail "the squatter's exec: exit status $squat_status, wanted 76 (lock lost); $(cat "$dir/squatter.err")"
jq -e --arg r "$svc" '.role == $r and .first_use == false and .separator == null
  and .hierarchy == null' <<<"$(binding "$pay")" >/dev/null ||
  fail "after bind --purge: $(binding "$pay")"
as "$ops" list --json --prefix "$prefix"
[ "$out" = "[]" ] || fail "the squatter's hold is still listed: $out"
as "$ops" waiters --json --prefix "$prefix"
[ "$out" = "[]" ] || fail "the squatter's request is still listed: $out"
as "$svc" exec -n --client "$pay" --lock ledger -- true
expect_status 0 "the service's exec -n after bind --purge"
echo "clients bind --purge: the squatter's hold and request ended (JSON counts), its exec lost its lease (1), the service locks at once"

# Who made each hold and request: shown to the admin login only.
as_bg holder.err "$svc" exec --client "$pay" --ttl 3 --lock ledger -- sleep 60
holder=$!
wait_for "the service's hold" count_under "$ops" list 1
as_bg waiter.err "$svc" exec -w 60 --client "$pay" --lock ledger -- true
waiter=$!
wait_for "the service's waiter" count_under "$ops" waiters 1
as "$ops" list --json --prefix "$prefix"
jq -e --arg l "$svc" '.[0].login == $l and .[0].waiters[0].login == $l' <<<"$out" >/dev/null ||
  fail "list --json as the admin: $out"
as "$svc" list --json --prefix "$prefix"
jq -e '.[0].login == null and .[0].waiters[0].login == null
  and (.[0] | has("login"))' <<<"$out" >/dev/null || fail "list --json as the service: $out"
as "$ops" list --prefix "$prefix"
head -1 <<<"$out" | grep -q "^KEY  *MODE  *OWNER  *LOGIN  *HOST\*" ||
  fail "list as the admin has no LOGIN column: $out"
grep -q "^DC#default#$pay#ledger  *EXCLUSIVE  *[0-9a-f]*  *$svc " <<<"$out" ||
  fail "list as the admin does not name the login: $out"
as "$svc" list --prefix "$prefix"
[[ $out != *LOGIN* ]] || fail "list as the service has a LOGIN column: $out"
as "$ops" show --client "$pay" ledger --json
jq -e --arg l "$svc" '.login == $l and .holders[0].login == $l' <<<"$out" >/dev/null ||
  fail "show --json as the admin: $out"
as "$ops" show --client "$pay" ledger
grep -q "^login  *$svc\$" <<<"$out" || fail "show as the admin names no login: $out"
as "$ops" waiters --json --prefix "$prefix"
jq -e --arg l "$svc" '.[0].login == $l' <<<"$out" >/dev/null || fail "waiters --json as the admin: $out"
as "$ops" waiters --prefix "$prefix"
head -1 <<<"$out" | grep -q " OWNER  *LOGIN " || fail "waiters as the admin has no LOGIN column: $out"
as "$ops" top --once --json --prefix "$prefix"
jq -e --arg l "$svc" '.held[0].login == $l and .waiters[0].login == $l' <<<"$out" >/dev/null ||
  fail "top --once --json as the admin: $out"
as "$svc" waiters --json --prefix "$prefix"
jq -e '.[0].login == null' <<<"$out" >/dev/null || fail "waiters --json as the service: $out"
echo "the admin sees the login of each hold and request (list, show, waiters, top; LOGIN column, \"login\"); the service sees none"

# unbind --purge: what it ended, in text, then the binding goes.
as "$ops" clients unbind --purge "$pay"
expect_status 0 "clients unbind --purge"
[[ $out == "$pay: purged: released 1 hold (1 EXCLUSIVE, 0 SHARED), cancelled 1 waiting request, forgot its hierarchy setting"$'\n'"$pay: unbound"* ]] ||
  fail "clients unbind --purge said: $out"
holder_status=0
wait "$holder" || holder_status=$?
[ "$holder_status" = 76 ] || fail "the purged holder's exec: exit status $holder_status, wanted 76 (lock lost); $(cat "$dir/holder.err")"
# The waiter's request went too; woken, it may take the free key at once.
wait "$waiter" 2>/dev/null || true
echo "clients unbind --purge: says what it ended (1 hold, 1 request), then unbinds; the holder's exec lost its lease"
echo "PASS"

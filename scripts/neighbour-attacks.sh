#!/usr/bin/env bash
# What a neighbour can do to a service's locks on a shared PostgreSQL
# database: a measurement, not a test (it asserts nothing; each line says
# what happened and how long it took). The before/after figures of the
# neighbours work come from it.
#
#   scripts/neighbour-attacks.sh BUILD_DIR
#
# Needs a server named by the PG* variables and a superuser login there
# (scripts/pg-cluster.sh start DIR && . DIR/env). It creates a database of
# its own, migrates it with dlmctl, creates two logins granted only
# dlm_client (svc_a: the victim service; nb: the neighbour), runs each
# attack as the neighbour with plain psql against the victim's dlmctl, and
# drops the database and logins at the end.
set -uo pipefail

build=${1:?usage: $0 BUILD_DIR}
dlmctl=$build/dlmctl
db=dlm_nb_$$
victim=dlm_nb_svc_$$
nb=dlm_nb_nb_$$
admin_url="postgresql://${PGUSER:-postgres}@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/$db"
victim_url="postgresql://$victim@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/$db"

cleanup() {
  psql -qd postgres -c "DROP DATABASE IF EXISTS $db" \
    -c "DROP ROLE IF EXISTS $victim" -c "DROP ROLE IF EXISTS $nb" >/dev/null 2>&1
}
trap cleanup EXIT

psql -qd postgres -c "CREATE DATABASE $db" || exit 1
"$dlmctl" --db "$admin_url" migrate --client-role dlm_client --admin-role dlm_admin >/dev/null 2>&1 || exit 1
psql -qd "$db" -c "CREATE ROLE $victim LOGIN IN ROLE dlm_client" \
  -c "CREATE ROLE $nb LOGIN IN ROLE dlm_client" || exit 1
# Schema 7 on: the DBA binds the victim's client id (dlmctl's own,
# "dlmctl") to its login, as docs/dba.md says (else the first login to use
# it owns it).
"$dlmctl" --db "$admin_url" clients bind dlmctl "$victim" >/dev/null 2>&1

as_admin() { psql -qAtd "$db" "$@"; }
# The neighbour's psql: its output, or the first line of its error.
as_nb() { psql -qAtd "$db" -U "$nb" "$@" 2>&1 | grep -v '^CONTEXT\|^SQL\|^PL/pgSQL\|^HINT\|^ ' | head -3 | tr '\n' ' '; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
# The victim's dlmctl exec: its messages (less the database line), and its
# exit status.
victim_exec() {
  local out rc
  out=$("$dlmctl" --db "$victim_url" exec "$@" 2>&1)
  rc=$?
  grep -v '^dlmctl: database' <<<"$out" | tr '\n' ' '
  return $rc
}
report() { printf '%-34s %s\n' "$1:" "$2"; }

echo "== a forged queued request (100 years)"
report "neighbour's dlm_register_wait" "$(as_nb -c "SELECT dlm_register_wait('DC#default#dlmctl#orders', '{}', NULL, NULL,
  'forged', 3153600000000, false)")"
t=$(now)
out=$(victim_exec --wait 3 --lock orders -- echo RAN)
report "victim exec --wait 3" "exit $?, $(since "$t") s: ${out:0:110}"
"$dlmctl" --db "$admin_url" purge --idle-for 1ms >/dev/null 2>&1
report "requests left after purge" "$(as_admin -c 'SELECT count(*) FROM dlm_lock_requests')"
as_admin -c "DELETE FROM dlm_lock_requests" >/dev/null

echo "== an open transaction after dlm_register_wait"
as_nb -c "BEGIN" -c "SELECT dlm_register_wait('DC#default#nb#x', '{}', NULL,
  NULL, 'forged', 60000, false)" -c "SELECT pg_sleep(6)" -c "COMMIT" >/dev/null &
sleep 0.5
"$dlmctl" --db "$victim_url" exec --lock busy -- sleep 2 >/dev/null 2>&1 &
sleep 0.5
t=$(now)
out=$(victim_exec --wait 3 --lock busy -- echo RAN)
report "victim waiting exec" "exit $?, $(since "$t") s: ${out:0:110}"
wait
as_admin -c "DELETE FROM dlm_lock_requests" >/dev/null

echo "== unregistering the victim's wait by its owner id"
psql -qAtd "$db" -U "$victim" -c "SELECT dlm_register_wait('DC#default#svc#k',
  '{}', NULL, NULL, 'victim-owner', 60000, false)" >/dev/null
report "neighbour's dlm_unregister_wait" \
  "$(as_nb -c "SELECT dlm_unregister_wait('DC#default#svc#k', 'victim-owner')")"
report "victim's requests left" "$(as_admin -c 'SELECT count(*) FROM dlm_lock_requests')"

echo "== a child acquired without its ancestors"
"$dlmctl" --db "$victim_url" exec --lock orders -- sleep 3 >/dev/null 2>&1 &
sleep 0.7
report "neighbour's orders.1 while orders held" "$(as_nb -c "SELECT acquired, fencing_token
  FROM dlm_try_acquire(array['DC#default#dlmctl#orders.1'], array[0::bigint],
  NULL, NULL, 'forged', 'forged-token', 10000, 'forged-host', 1, false)")"
report "holds shown (key host pid)" "$(as_admin -F' ' -c "SELECT resource, holder_host,
  holder_pid FROM dlm_list_held('') ORDER BY resource" | tr '\n' ';')"
wait

echo "== an open transaction holding the victim's row"
t=$(now)
(out=$(victim_exec --ttl 6 --lock job -- sleep 10)
 report "victim exec --ttl 6 (sleep 10)" "exit $? after $(since "$t") s: ${out:0:80}") &
sleep 0.5
as_nb -c "BEGIN" -c "SELECT acquired FROM dlm_try_acquire(
  array['DC#default#dlmctl#job'], array[0::bigint], NULL, NULL, 'forged',
  'forged-token-2', 10000, 'h', 1, false)" -c "SELECT pg_sleep(11)" \
  -c "COMMIT" >/dev/null
wait

#!/usr/bin/env bash
# The hardening work's outside view: caps, a forged-NOTIFY flood, a SQLite
# file deleted under a holder, secrets in connection strings and inputs
# outside the contract, each tried with psql and dlmctl. A measurement, not
# a test (it asserts nothing; each line says what happened). The tests that
# pin each behaviour down are named in docs/testing.md; the junk workload
# and the acquisition times are measured by dlm_bench --benchmarks=junk and
# the contention tests.
#
#   scripts/hardening-checks.sh BUILD_DIR
#
# Needs a server named by the PG* variables and a superuser login there
# (scripts/pg-cluster.sh start DIR && . DIR/env). It creates a database of
# its own, migrates it with dlmctl and drops it at the end.
set -uo pipefail

build=${1:?usage: $0 BUILD_DIR}
dlmctl=$build/dlmctl
db=dlm_hard_$$
url="postgresql://${PGUSER:-postgres}@${PGHOST:-127.0.0.1}:${PGPORT:-5432}/$db"
work=$(mktemp -d /tmp/dlm-hard.XXXX)

cleanup() {
  jobs -p | xargs -r kill 2>/dev/null
  psql -qd postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

psql -qd postgres -c "CREATE DATABASE $db" || exit 1
"$dlmctl" --db "$url" migrate --client-role dlm_client --admin-role dlm_admin >/dev/null 2>&1 || exit 1

# psql's answer, or the first lines of its error and notices.
sql() {
  psql -qAtd "$db" "$@" 2>&1 | grep -v '^CONTEXT\|^SQL\|^PL/pgSQL\|^HINT\|^ ' |
    sed 's/^psql:[^ ]* //' | head -3 | tr '\n' ' '
}
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
report() { printf '%-44s %s\n' "$1:" "$2"; }
# dlmctl's output (less the database line) and exit status.
ctl() {
  local out rc
  out=$("$dlmctl" "$@" 2>&1)
  rc=$?
  printf 'exit %s: %s' "$rc" "$(grep -v '^dlmctl: database' <<<"$out" | tr '\n' ' ' | cut -c1-150)"
}

echo "== caps (the schema's dlm_limits)"
report "one call with 1,000 keys (a 1,000-segment id)" "$(sql -c "
  SELECT acquired FROM (SELECT array_agg('DC#f#caps#' ||
    array_to_string(array_fill('a'::text, ARRAY[i]), '.') ORDER BY i) AS k
    FROM generate_series(1, 1000) i) s,
  dlm_try_acquire(s.k, array_fill(1::bigint, ARRAY[1000]), s.k[1000] || '.',
                  s.k[1000] || '/', 'o', 't1', 60000, 'h', 1, false)")"
report "lock rows it made" "$(sql -c "SELECT count(*) FROM dlm_locks
  WHERE resource LIKE 'DC#f#caps#a%'")"
# One call per holder, each its own subtransaction: the first refusal ends
# the loop and says where.
report "2,000 SHARED holders of one key" "$(sql -c "DO \$\$ BEGIN
  FOR i IN 1..2000 LOOP BEGIN
    PERFORM dlm_try_acquire(ARRAY['DC#f#caps#doc'], ARRAY[1::bigint],
      'DC#f#caps#doc.', 'DC#f#caps#doc/', 'o' || i, 's' || i, 60000, 'h', 1, true);
  EXCEPTION WHEN others THEN RAISE NOTICE 'holder % refused: %', i, SQLERRM; EXIT;
  END; END LOOP; END \$\$")"
report "SHARED holders of the key" "$(sql -c "SELECT count(*) FROM dlm_shared_holds
  WHERE resource = 'DC#f#caps#doc'")"
report "500 waits of one owner" "$(sql -c "DO \$\$ BEGIN
  FOR i IN 1..500 LOOP BEGIN
    PERFORM dlm_register_wait('DC#f#caps#r' || i, '{}', 'DC#f#caps#r' || i || '.',
      'DC#f#caps#r' || i || '/', 'w', 60000, false);
  EXCEPTION WHEN others THEN RAISE NOTICE 'wait % refused: %', i, SQLERRM; EXIT;
  END; END LOOP; END \$\$")"
report "a 100-year TTL" "$(sql -c "SELECT acquired FROM dlm_try_acquire(
  ARRAY['DC#f#caps#y'], ARRAY[1::bigint], 'DC#f#caps#y.', 'DC#f#caps#y/', 'o',
  'ty', 3153600000000, 'h', 1, false)")"
sql -c "DELETE FROM dlm_lock_requests" >/dev/null

echo "== a flood of forged NOTIFY dlm_release at a waiter"
sql -c "ALTER DATABASE $db SET track_functions = 'pl'" >/dev/null
attempts() {
  psql -qAtd "$db" -c "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
    WHERE funcname = 'dlm_try_acquire'"
}
commits() {
  psql -qAtd "$db" -c "SELECT xact_commit FROM pg_stat_database WHERE datname = '$db'"
}
"$dlmctl" --db "$url" exec --lock flood -- sleep 10 >/dev/null 2>&1 &
sleep 1
before=$(attempts)
commits_before=$(commits)
yes "NOTIFY dlm_release, 'DC#default#dlmctl#flood';" | psql -qd "$db" >/dev/null 2>&1 &
flood=$!
t=$(now)
out=$(ctl --db "$url" exec --wait 8 --lock flood -- echo RAN)
report "waiter exec --wait 8 under the flood" "$out after $(since "$t") s"
kill "$flood" 2>/dev/null
wait "$flood" 2>/dev/null
sleep 1.5 # the backends' statistics reach pg_stat after they flush
report "NOTIFYs sent (transactions committed)" "$(($(commits) - commits_before))"
report "the waiter's attempts (dlm_try_acquire)" "$(($(attempts) - before - 1))"
wait
"$dlmctl" --db "$url" exec --lock real -- sleep 2 >/dev/null 2>&1 &
sleep 0.3
yes "NOTIFY dlm_release, 'DC#default#dlmctl#real';" | psql -qd "$db" >/dev/null 2>&1 &
flood=$!
t=$(now)
out=$(ctl --db "$url" exec --wait 8 --lock real -- echo RAN)
report "waiter of a 2 s hold, under the flood" "$out after $(since "$t") s (held 1.7 s more)"
kill "$flood" 2>/dev/null
wait

echo "== SQLite: the file deleted under a holder"
file=$work/locks.sqlite
"$dlmctl" --db "sqlite:$file" migrate >/dev/null 2>&1
# shellcheck disable=SC2016 # the token is the command's to expand
("$dlmctl" --db "sqlite:$file" exec --ttl 2 --lock k -- \
  sh -c 'echo first holder token $DLM_FENCING_TOKEN
    trap "echo first holder stopped at \$(date +%s.%3N); exit 143" TERM
    sleep 5 & wait' >"$work/first.out" 2>&1
 echo "exit $?" >>"$work/first.out") &
sleep 1
report "file deleted at" "$(date +%s.%3N)"
rm -f "$file" "$file-wal" "$file-shm"
report "dlmctl migrate of the path" "$(ctl --db "sqlite:$file" migrate | cut -c1-40)"
# shellcheck disable=SC2016
report "a second holder" "$(ctl --db "sqlite:$file" exec --lock k -- \
  sh -c 'echo second holder token $DLM_FENCING_TOKEN at $(date +%s.%3N)')"
wait
report "the first holder" "$(grep -v '^dlmctl: database' "$work/first.out" | tr '\n' ' ' | cut -c1-330)"

echo "== secrets in connection strings"
for db_arg in "postgresql://u:Xk/9v+Qz=@127.0.0.1:1/db" \
  "postgresql://u:Mk@rk3r9@127.0.0.1:1/db" "host=127.0.0.1 port=1 pasword=S3cret" \
  "host=127.0.0.1 port=1 passwrd=S3cret" "postgresql://u@127.0.0.1:1/db?passwd=S3cret"; do
  out=$(ctl --db "$db_arg" list)
  shown=no
  for secret in Xk/9v+Qz= Xk Mk@rk3r9 rk3r9 S3cret; do
    [[ $out == *"$secret"* ]] && shown="YES ($secret)"
  done
  report "list --db '${db_arg:0:28}...'" "password shown: $shown; ${out:0:90}"
done

echo "== inputs outside the contract"
report "list --prefix \$'\\xff' (PostgreSQL)" "$(ctl --db "$url" list --prefix $'\xff')"
report "dlm_listen_port=abc" "$(ctl --db "$url?dlm_listen_port=abc" list)"
report "dlm_listen_host=no-such-host.invalid" "$(ctl --db "$url?dlm_listen_host=no-such-host.invalid" list)"
report "exec --ttl nan" "$(ctl --db "sqlite:$work/other.sqlite" exec --ttl nan --lock k -- true)"

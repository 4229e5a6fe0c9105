#!/usr/bin/env bash
# docs/protocol.md in use: a psql client that makes the documented calls and
# the C++ library (through dlmctl exec) exclude each other on one key, and
# the fencing token grows across both.
#
#   protocol_psql_test.sh DLMCTL SOURCE_DIR
#
# On the server the PG* variables name (PGUSER a superuser: it makes a
# database of its own and drops it after).
set -euo pipefail
dlmctl=$1
root=$2
[[ -n ${PGHOST:-} ]] || {
  echo "PGHOST is not set: this test needs the PG* variables of scripts/test.sh's server" >&2
  exit 1
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
db="dlm_protocol_$$_$RANDOM"
holder=""
cleanup() {
  [[ -z $holder ]] || kill "$holder" 2>/dev/null || true
  dropdb --if-exists "$db" >/dev/null 2>&1 || true
}
trap cleanup EXIT
createdb "$db"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c 'CREATE SCHEMA locks'
PGOPTIONS='-c search_path=locks -c dlm.client_role=dlm_client -c dlm.admin_role=dlm_admin' \
  psql -X -q -v ON_ERROR_STOP=1 -1 -d "$db" \
  -f "$root/schema/postgres.sql" >/dev/null 2>&1 || fail "applying schema/postgres.sql failed"
dl=("$dlmctl" --db "postgresql:///$db" --schema locks --client proto)

q() { psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }
# The key of `dlmctl --client proto exec --lock job` (farm "default"), its
# CRC-32, its descendant range; no ancestors (one segment).
key='DC#default#proto#job'
crc=$(python3 -c 'import sys, zlib; print(zlib.crc32(sys.argv[1].encode()))' "$key")
new_secret() { python3 -c 'import secrets; print(secrets.token_hex(16))'; }
owner=$(new_secret)
try_acquire() {  # TOKEN -> "acquired|fencing_token|blocked_by"
  q "SELECT acquired, fencing_token, blocked_by FROM locks.dlm_try_acquire(
       ARRAY['$key'], ARRAY[$crc]::bigint[], '$key.', '$key/', '$owner',
       '$1', 30000, 'psql-client', $$, false)"
}
release() {  # TOKEN -> t|f
  q "SELECT locks.dlm_release('$key', '$1', '{}', '$key.', '$key/')"
}

# 1. psql holds the key: the library cannot take it.
token=$(new_secret)
got=$(try_acquire "$token")
[[ $got == t\|* ]] || fail "psql's dlm_try_acquire did not acquire a free key: $got"
first_fence=$(cut -d'|' -f2 <<<"$got")
status=0
"${dl[@]}" exec -n --lock job -- true 2>/dev/null || status=$?
[[ $status == 75 ]] || fail "dlmctl exec -n ran while psql held the key (exit $status, wanted 75)"
# 2. psql releases it by its token: the library takes it.
[[ $(release "$token") == t ]] || fail "dlm_release of psql's own hold answered false"
"${dl[@]}" exec -n --lock job -- true 2>/dev/null ||
  fail "dlmctl exec -n could not take the key psql had released"
# 3. The library holds the key: psql's attempt is refused, naming it.
"${dl[@]}" exec --lock job -- sleep 30 2>/dev/null &
holder=$!
for _ in $(seq 100); do
  [[ $(q "SELECT count(*) FROM locks.dlm_list_held('DC#default#proto#')") == 1 ]] && break
  sleep 0.05
done
got=$(try_acquire "$(new_secret)")
[[ $got == f\|*\|$key ]] || fail "psql acquired a key the library held: $got"
kill "$holder"
wait "$holder" 2>/dev/null || true
holder=""
# 4. Freed by the library: psql acquires, with a larger fencing token.
token=$(new_secret)
got=$(try_acquire "$token")
[[ $got == t\|* ]] || fail "psql could not acquire after the library released: $got"
last_fence=$(cut -d'|' -f2 <<<"$got")
((last_fence > first_fence)) || fail "fencing token $last_fence not above $first_fence"
[[ $(release "$token") == t ]] || fail "the last release answered false"
echo "psql and dlmctl excluded each other on $key; fencing tokens $first_fence -> $last_fence"

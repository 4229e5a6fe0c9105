#!/usr/bin/env bash
# Runs an example (or an example's test driver) on a fresh database of its
# own, as ctest does:
#
#   run_example.sh sqlite|postgres DLMCTL COMMAND [ARGS...]
#
# runs `COMMAND DATABASE_URL ARGS...` with DLMCTL exported, where
# DATABASE_URL is
#   sqlite    sqlite:<a new temporary directory>/locks.sqlite (the example
#             creates the lock tables itself);
#   postgres  postgresql:// (the server of the PG* variables), in a new
#             schema that `dlmctl migrate` prepared first and that PGOPTIONS
#             puts on the search_path of every connection (the example's own
#             tables land there too), dropped afterwards. Without a server
#             this fails: it never skips.
# Exits with COMMAND's status.
set -euo pipefail
kind=$1
export DLMCTL=$2
shift 2
fail() { echo "FAIL: $*" >&2; exit 1; }

dir=$(mktemp -d)
schema=
cleanup() {
  if [ -n "$schema" ]; then
    psql -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"

case $kind in
  sqlite)
    url="sqlite:$dir/locks.sqlite"
    ;;
  postgres)
    [[ -n ${PGHOST:-}${PGHOSTADDR:-}${PGDATABASE:-}${PGSERVICE:-} ]] ||
      fail "no PostgreSQL server: set PGHOST/PGPORT/PGUSER/PGDATABASE (scripts/test.sh does)"
    name=$(basename "$1" | tr -c 'a-z0-9_\n' '_')
    schema="dlm_example_${name%_sh}_$$"
    psql -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null ||
      { schema=; fail "cannot reach PostgreSQL through PG* (psql failed)"; }
    "$DLMCTL" --db postgresql:// --schema "$schema" migrate \
      --client-role dlm_client --admin-role dlm_admin >"$dir/migrate" 2>&1 ||
      fail "dlmctl migrate failed: $(cat "$dir/migrate")"
    export PGOPTIONS="${PGOPTIONS:-} -c search_path=$schema"
    url="postgresql://"
    ;;
  *) fail "usage: run_example.sh sqlite|postgres DLMCTL COMMAND [ARGS...]" ;;
esac

command=$1
shift
status=0
"$command" "$url" "$@" || status=$?
exit "$status"

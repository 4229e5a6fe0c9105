#!/usr/bin/env bash
# README's "The same on PostgreSQL", as written: its schema step (the sh
# block, on a fresh database of its own instead of `orders`), then the
# README's first program with a URL of that database, whose login finds the
# `locks` schema on its search_path.
#
#   readme_postgres_test.sh SOURCE_DIR LIBRARY CXX
#
# On the server the PG* variables name (PGUSER a superuser).
set -euo pipefail
root=$1
library=$2
cxx=$3
[[ -n ${PGHOST:-} ]] || {
  echo "PGHOST is not set: this test needs the PG* variables of scripts/test.sh's server" >&2
  exit 1
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
db="dlm_readme_$$_$RANDOM"
work=$(mktemp -d)
cleanup() {
  dropdb --if-exists "$db" >/dev/null 2>&1 || true
  # The roles the README's step names (cluster-wide; nothing else uses them).
  psql -X -q -d postgres -c 'DROP ROLE IF EXISTS orders_locks_admin, orders_locks' >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
readme="$root/README.md"

# The one sh block of the PostgreSQL section, run from the source tree.
step=$(awk '/^## The same on PostgreSQL/ { on = 1 } on && /^```sh$/ { grab = 1; next }
            grab && /^```$/ { exit } grab { print }' "$readme")
[[ -n $step ]] || fail "no sh block under '## The same on PostgreSQL' in README.md"
grep -q -- '-d orders ' <<<"$step" || fail "the README's step no longer names -d orders: $step"
grep -q -- '^createdb orders' <<<"$step" || fail "the README's step no longer creates its database: $step"
grep -q -- "dlm.client_role=orders_locks -c dlm.admin_role=orders_locks_admin" <<<"$step" ||
  fail "the README's step no longer names its roles: $step"
# As on a fresh server: the database does not exist before the step.
step=${step//-d orders /-d $db }
step=${step//createdb orders/createdb $db}
(cd "$root" && bash -c "$step") >"$work/step.log" 2>&1 ||
  { cat "$work/step.log" >&2; fail "the README's schema step failed as written"; }
# Quiet (psql -q): a few notices at most, not a line per statement.
lines=$(wc -l <"$work/step.log")
((lines <= 5)) || { cat "$work/step.log" >&2; fail "the README's schema step printed $lines lines"; }

# The first program (the <!-- run --> block), its URL pointed at $db.
awk '/^<!-- run -->$/ { mark = 1; next } mark && /^```cpp$/ { grab = 1; next }
     grab && /^```$/ { exit } grab { print }' "$readme" >"$work/first.cpp"
grep -q 'openStore("sqlite:locks.sqlite")' "$work/first.cpp" ||
  fail "the README's first program no longer opens sqlite:locks.sqlite"
url="postgresql:///$db?options=-csearch_path%3Dlocks"
sed -i "s|openStore(\"sqlite:locks.sqlite\")|openStore(\"$url\")|" "$work/first.cpp"
libdir=$(dirname "$library")
"$cxx" -std=c++17 "$work/first.cpp" -I"$root/include" -DDLM_WITH_POSTGRES=1 \
  -DDLM_WITH_SQLITE=1 "$library" -Wl,-rpath,"$libdir" -o "$work/first"
out=$("$work/first") || fail "the README's program failed on PostgreSQL: $out"
grep -q '^holding DC#default#billing#nightly.import, fencing token 1$' <<<"$out" || fail "unexpected output: $out"
echo "README on PostgreSQL: $out"

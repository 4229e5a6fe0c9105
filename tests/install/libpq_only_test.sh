#!/usr/bin/env bash
# An application on plain libpq hands dlm its transaction
# (dlm::LibpqTransaction) without libpqxx:
#
#   libpq_only_test.sh SOURCE_DIR LIBRARY CXX
#
# 1. examples/libpq_transaction.cpp compiles with include/ and libpq's
#    pkg-config flags alone, and the headers it read (the compiler's -MD
#    list) include no libpqxx header: libpqxx's headers sit on the
#    compiler's default path, so only this list shows that none was needed;
# 2. dlm/postgres_store.h's declaration of PGconn agrees with libpq's,
#    whichever of the two comes first;
# 3. the program links with LIBRARY (a shared libdlm) and libpq's pkg-config
#    flags alone, and names no libpqxx among the libraries it needs.
# Needs no server (example_libpq_transaction_postgres runs the program).
set -euo pipefail
root=$1
library=$2
cxx=$3
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
read -r -a pq_cflags <<<"$(pkg-config --cflags libpq)"
read -r -a pq_libs <<<"$(pkg-config --libs libpq)"
flags=(-std=c++17 -Wall -Wextra -Wpedantic -Werror -I "$root/include" "${pq_cflags[@]}")

echo "== 1. compile examples/libpq_transaction.cpp"
"$cxx" "${flags[@]}" -MD -MF "$work/deps" -c "$root/examples/libpq_transaction.cpp" \
  -o "$work/app.o" || fail "it does not compile with include/ and libpq's flags"
grep -q 'dlm/postgres_store\.h' "$work/deps" || fail "dlm/postgres_store.h not read (deps: $work/deps)"
grep -q 'libpq-fe\.h' "$work/deps" || fail "libpq-fe.h not read"
if grep -Eq '(^|[ /])pqxx/' "$work/deps"; then
  grep -Eo '[^ ]*pqxx/[^ ]*' "$work/deps" | head >&2
  fail "compiling it read libpqxx headers (above)"
fi
echo "no libpqxx header read"

echo "== 2. PGconn declared by both headers, in either order"
for order in "dlm/postgres_store.h libpq-fe.h" "libpq-fe.h dlm/postgres_store.h"; do
  {
    for h in $order; do echo "#include <$h>"; done
    echo 'dlm::LibpqTransaction adapterOf(PGconn* c) { return dlm::LibpqTransaction(c); }'
    echo 'PGconn* connectionOf(const dlm::LibpqTransaction& t) { return t.connection(); }'
  } >"$work/order.cpp"
  "$cxx" "${flags[@]}" -fsyntax-only "$work/order.cpp" || fail "includes in the order: $order"
done
echo "both orders compile"

echo "== 3. link with libdlm and libpq only"
libdir=$(dirname "$(readlink -f "$library")")
"$cxx" "$work/app.o" "$library" "-Wl,-rpath,$libdir" "${pq_libs[@]}" -o "$work/app" ||
  fail "it does not link with libdlm and libpq alone"
needed=$(readelf -d "$work/app" | grep NEEDED || true)
echo "$needed"
if grep -q pqxx <<<"$needed"; then
  fail "the program needs libpqxx itself"
fi
echo "libpq_only: builds and links without libpqxx"

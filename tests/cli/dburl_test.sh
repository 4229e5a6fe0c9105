#!/usr/bin/env bash
# How dlmctl is told which database to use (--db, DLM_DATABASE_URL, PG*
# variables, the SQLite default), as an operator types it:
#
#   dburl_test.sh DLMCTL sqlite    no server needed: refusals exit 2 with the
#       accepted forms, no password is ever printed, list and release create
#       no database file; the database is announced on stderr with -v and
#       before an error (also with -q), not otherwise;
#   dburl_test.sh DLMCTL postgres  against the server named by the PG*
#       variables (scripts/test.sh sets them): a libpq keyword string and a
#       URI work, PG* variables without --db select PostgreSQL (stderr says
#       so, no SQLite file appears). Fails, never skips, without a server.
set -uo pipefail
dlmctl=$1
mode=$2
dir=$(mktemp -d)
secret=secretpw
fail() { echo "FAIL: $*" >&2; exit 1; }

# run ARGS...: runs dlmctl in $dir/cwd; sets status, out (stdout), err.
run() {
  status=0
  (cd "$dir/cwd" && "$dlmctl" "$@") >"$dir/out" 2>"$dir/err" || status=$?
  out=$(cat "$dir/out")
  err=$(cat "$dir/err")
}
expect_status() {
  [ "$status" = "$1" ] || fail "dlmctl $2: exit status $status, wanted $1; stderr: $err"
}
no_secret() {
  case "$out$err" in *"$secret"*) fail "dlmctl $1 printed the password: $out $err" ;; esac
}
no_files() {
  [ -z "$(ls -A "$dir/cwd")" ] || fail "dlmctl $1 created $(ls -A "$dir/cwd")"
}
mkdir "$dir/cwd"

sqlite_checks() {
  # The SQLite default is only the default when no PG* variable names a
  # server: leave none.
  unset PGHOST PGHOSTADDR PGDATABASE PGSERVICE DLM_DATABASE_URL

  # list and release in a directory without a database create none.
  run list
  expect_status 1 "list (no database)"
  # A failure says which database, and why that one (every variable that
  # would have chosen PostgreSQL named).
  [[ $err == *"database: sqlite:$dir/cwd/dlm.sqlite (default: no --db, DLM_DATABASE_URL, PGHOST, PGHOSTADDR, PGDATABASE or PGSERVICE)"* ]] ||
    fail "list did not say it used the default file: $err"
  [[ $err == *"no database at"* ]] || fail "list did not say there is no database: $err"
  no_files "list"
  run --db "sqlite:$dir/cwd/locks.sqlite" release --force jobs.import
  expect_status 1 "release (no database)"
  [[ $err == *"no database at"* ]] || fail "release did not say there is no database: $err"
  no_files "release"
  run --db "sqlite:$dir/cwd/locks.sqlite" release --force DC#default#dlmctl#jobs.import
  expect_status 1 "release of a store key (no database)"
  no_files "release of a store key"

  # A bare word (what used to become a SQLite file) is a usage mistake.
  run --db dlm.sqlite migrate
  expect_status 2 "--db dlm.sqlite migrate"
  [[ $err == *"sqlite:dlm.sqlite"* && $err == *"postgresql://"* ]] ||
    fail "the refusal of a bare word does not name the forms: $err"
  no_files "--db dlm.sqlite migrate"
  status=0
  (cd "$dir/cwd" && DLM_DATABASE_URL=locks "$dlmctl" list) >"$dir/out" 2>"$dir/err" ||
    status=$?
  err=$(cat "$dir/err")
  expect_status 2 "DLM_DATABASE_URL=locks list"
  [[ $err == *"DLM_DATABASE_URL"* ]] || fail "the refusal does not name DLM_DATABASE_URL: $err"
  no_files "DLM_DATABASE_URL=locks list"

  # Malformed or foreign URLs and keyword strings: refused, password hidden.
  for db in "postgresql://u:$secret@[::1" "mysql://u:$secret@h/db" \
    "host=h password=$secret bogus=1" "postgresql:/u:$secret@h/db" \
    "password='$secret"; do
    run --db "$db" list
    expect_status 2 "--db '$db' list"
    no_secret "--db '$db' list"
    no_files "--db '$db' list"
  done
  # Well-formed but nothing listens on port 1: a connection error, still
  # without the password, and no file named after the string.
  run --db "host=127.0.0.1 port=1 dbname=app password=$secret" list
  expect_status 1 "list on a closed port"
  no_secret "list on a closed port"
  no_files "list on a closed port"

  # Passwords with the characters people put in them, around a marker, in
  # every place a password goes (URI user-info, keywords spelt right or
  # wrong, a URI query, beside dlm_* parameters), through --db and through
  # DLM_DATABASE_URL: whatever dlmctl answers, the marker is not in it.
  local marker=Q7xMARKx9 specials='/@:?=&% #+,;' i pw db kw
  local kws=(password pasword passwd passwrd PASSWORD)
  RANDOM=20261127
  for ((i = 0; i < 24; i++)); do
    pw="${specials:RANDOM % ${#specials}:1}${marker}${specials:RANDOM % ${#specials}:1}"
    kw=${kws[RANDOM % ${#kws[@]}]}
    case $((i % 5)) in
      0) db="postgresql://app:$pw@127.0.0.1:1/db" ;;
      1) db="host=127.0.0.1 port=1 $kw=$pw dbname=db" ;;
      2) db="postgresql://app@127.0.0.1:1/db?$kw=$pw" ;;
      3) db="postgresql://app:$pw@127.0.0.1:1/db?dlm_listen_port=x" ;;
      *) db="host=127.0.0.1 port=1 password=$pw dlm_listen_hots=h" ;;
    esac
    run --db "$db" list
    case "$out$err" in *"$marker"*) fail "dlmctl --db '$db' list printed the password: $out $err" ;; esac
    status=0
    (cd "$dir/cwd" && DLM_DATABASE_URL=$db "$dlmctl" waiters) >"$dir/out" 2>"$dir/err" ||
      status=$?
    case "$(cat "$dir/out" "$dir/err")" in
      *"$marker"*) fail "DLM_DATABASE_URL='$db' dlmctl waiters printed the password: $(cat "$dir/err")" ;;
    esac
    no_files "--db '$db' list"
  done

  # The explicit prefix works, and is announced with -v only (-v before or
  # after the command word).
  run -v --db "sqlite:$dir/locks.sqlite" migrate
  expect_status 0 "migrate on sqlite:"
  [[ $err == "dlmctl: database: sqlite:$dir/locks.sqlite (from --db)" ]] ||
    fail "migrate -v announced '$err'"
  run --db "sqlite:$dir/locks.sqlite" list
  expect_status 0 "list on sqlite:"
  [[ $out == "no held locks" ]] || fail "list printed '$out'"
  [ -z "$err" ] || fail "list without -v wrote on stderr: $err"
  run --db "sqlite:$dir/locks.sqlite" list --verbose
  [[ $err == "dlmctl: database: sqlite:$dir/locks.sqlite (from --db)" ]] ||
    fail "list --verbose announced '$err'"
  run -q --db "sqlite:$dir/locks.sqlite" exec --lock q -- true
  expect_status 0 "exec -q"
  [ -z "$err" ] || fail "exec -q wrote on stderr: $err"
  # -q keeps errors, and the database they concern.
  run -q --db "sqlite:$dir/none.sqlite" list
  expect_status 1 "list -q (no database)"
  [[ $err == "dlmctl: database: sqlite:$dir/none.sqlite (from --db)"$'\n'"dlmctl: there is no database at "* ]] ||
    fail "list -q on no database said '$err'"
  run -q -v list
  expect_status 2 "-q -v"
}

postgres_checks() {
  [[ -n ${PGHOST:-}${PGDATABASE:-}${PGSERVICE:-} ]] ||
    fail "no PostgreSQL server: set PGHOST/PGPORT/PGUSER/PGDATABASE (scripts/test.sh does)"
  unset DLM_DATABASE_URL
  local schema
  schema="dlm_cli_dburl_$$_$RANDOM"
  psql -v ON_ERROR_STOP=1 -qc "CREATE SCHEMA $schema" >/dev/null ||
    fail "cannot reach PostgreSQL through PG* (psql failed)"
  # shellcheck disable=SC2064
  trap "psql -qc 'DROP SCHEMA $schema CASCADE' >/dev/null 2>&1; rm -rf '$dir'" EXIT

  local host=${PGHOST:-127.0.0.1} port=${PGPORT:-5432}
  local user=${PGUSER:-$(id -un)} db=${PGDATABASE:-${PGUSER:-$(id -un)}}
  local keywords="host=$host port=$port user=$user dbname=$db password=$secret"
  local uri="postgresql://$user:$secret@$host:$port/$db"

  # A keyword string (the test cluster trusts local connections, so the
  # password is only there to be hidden).
  run --db "$keywords" --schema "$schema" migrate -v --client-role dlm_client --admin-role dlm_admin
  expect_status 0 "migrate with a keyword string"
  [[ $out == *"database postgresql://$user@$host:$port/$db (PostgreSQL, schema $schema): schema at version "* ]] ||
    fail "migrate printed '$out'"
  warning="dlmctl: warning: the password in --db can be read by every user of this host (ps); put it in ~/.pgpass or PGPASSWORD, or the whole URL in DLM_DATABASE_URL"
  [[ $err == "$warning"$'\n'"dlmctl: database: postgresql://$user@$host:$port/$db (from --db)" ]] ||
    fail "migrate announced '$err'"
  no_secret "migrate with a keyword string"
  no_files "migrate with a keyword string"

  # A URI with the password in it.
  run --db "$uri" --schema "$schema" list
  expect_status 0 "list with a URI"
  [[ $out == "no held locks" ]] || fail "list printed '$out'"
  [[ $err == "$warning" ]] || fail "list with a password in --db warned '$err'"
  no_secret "list with a URI"
  run --db "$uri" --schema "$schema" release --force jobs.import
  expect_status 1 "release with a URI (nothing held)"
  [[ $out == *"was not held"* ]] || fail "release printed '$out'"
  no_secret "release with a URI"

  # The password warning: only for --db, and not with --quiet.
  run -q --db "$uri" --schema "$schema" list
  expect_status 0 "list -q with a URI"
  [[ -z $err ]] || fail "list -q with a password in --db said '$err'"
  run --db "postgresql://$user@$host:$port/$db" --schema "$schema" list
  [[ -z $err ]] || fail "list without a password in --db said '$err'"

  # The same through DLM_DATABASE_URL.
  status=0
  (cd "$dir/cwd" && DLM_DATABASE_URL=$keywords "$dlmctl" -v --schema "$schema" list) \
    >"$dir/out" 2>"$dir/err" || status=$?
  out=$(cat "$dir/out") err=$(cat "$dir/err")
  expect_status 0 "list with DLM_DATABASE_URL"
  [[ $err == *"(from DLM_DATABASE_URL)"* ]] || fail "list announced '$err'"
  [[ $err != *warning* ]] || fail "DLM_DATABASE_URL warned: '$err'"
  no_secret "list with DLM_DATABASE_URL"

  # No --db, no DLM_DATABASE_URL: the PG* variables choose PostgreSQL, and
  # no SQLite file appears in the working directory.
  run --verbose --schema "$schema" list
  expect_status 0 "list with PG* only"
  [[ $err == "dlmctl: database: postgresql://"*"(from PG"* ]] ||
    fail "list with PG* only announced '$err'"
  [[ $out == "no held locks" ]] || fail "list printed '$out'"
  # PGHOSTADDR alone chooses PostgreSQL too, and is named.
  status=0
  (cd "$dir/cwd" && env -u PGHOST -u PGDATABASE -u PGSERVICE PGHOSTADDR=$host \
    "$dlmctl" -v --schema "$schema" list) >"$dir/out" 2>"$dir/err" || status=$?
  out=$(cat "$dir/out") err=$(cat "$dir/err")
  expect_status 0 "list with PGHOSTADDR only"
  [[ $err == "dlmctl: database: postgresql://"*"(from PGHOSTADDR)" ]] ||
    fail "list with PGHOSTADDR only announced '$err'"
  run --schema "$schema" migrate --client-role dlm_client --admin-role dlm_admin
  expect_status 0 "migrate with PG* only"
  [[ $out == "database postgresql://"*" (PostgreSQL, schema $schema): schema at version "* ]] ||
    fail "migrate with PG* only printed '$out'"
  no_files "commands with PG* only"

  refused_login_checks "$host" "$port" "$db"
}

# A login the server refuses is PERMISSION_DENIED (exit 77) with the
# server's SQLSTATE, at once (not retried as a lost connection), and the
# password is never shown. The test cluster trusts every local login, so the
# wrong password is played by a stand-in server (python3) that asks for a
# password and refuses it as PostgreSQL does; the missing role is the real
# server's answer.
refused_login_checks() {
  local host=$1 port=$2 db=$3
  run --db "postgresql://dlm_no_such_role_$$:$secret@$host:$port/$db" list
  expect_status 77 "list as a role that does not exist"
  [[ $err == *'role "dlm_no_such_role_'*'" does not exist (SQLSTATE 28000)'*'[PERMISSION_DENIED]' ]] ||
    fail "a missing role said '$err'"
  no_secret "list as a role that does not exist"

  command -v python3 >/dev/null || fail "python3 is needed for the wrong-password server"
  python3 - "$dir/refusing.port" "$dir/refusing.logins" <<'PY' &
import socket, struct, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
s.settimeout(30)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
logins = 0
def read(c, n):
    b = b""
    while len(b) < n:
        chunk = c.recv(n - len(b))
        if not chunk:
            raise EOFError
        b += chunk
    return b
def message(kind, body):
    return kind + struct.pack("!I", len(body) + 4) + body
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        break
    try:
        read(c, struct.unpack("!I", read(c, 4))[0] - 4)   # startup packet
        c.sendall(message(b"R", struct.pack("!I", 3)))  # cleartext password
        kind = read(c, 1)
        read(c, struct.unpack("!I", read(c, 4))[0] - 4)
        fields = b"".join(k + v + b"\0" for k, v in [
            (b"S", b"FATAL"), (b"V", b"FATAL"), (b"C", b"28P01"),
            (b"M", b'password authentication failed for user "app"'),
            (b"F", b"auth.c"), (b"L", b"334"), (b"R", b"auth_failed")])
        # Counted before the client can read the refusal.
        logins += 1
        open(sys.argv[2], "w").write(str(logins))
        c.sendall(message(b"E", fields + b"\0"))
    except (EOFError, OSError):
        pass
    c.close()
PY
  local refusing=$!
  local i
  for i in $(seq 1 100); do [ -s "$dir/refusing.port" ] && break; sleep 0.05; done
  local fake_port
  fake_port=$(cat "$dir/refusing.port") || fail "the wrong-password server did not start"
  run --db "postgresql://app:$secret@127.0.0.1:$fake_port/app?sslmode=disable&gssencmode=disable" list
  expect_status 77 "list with a wrong password"
  [[ $err == *'password authentication failed for user "app" (SQLSTATE 28P01)'*'[PERMISSION_DENIED]' ]] ||
    fail "a wrong password said '$err'"
  [[ $err != *08001* && $err != *auth.c* ]] || fail "a wrong password said '$err'"
  no_secret "list with a wrong password"
  [ "$(cat "$dir/refusing.logins")" = 1 ] ||
    fail "the refused login was tried $(cat "$dir/refusing.logins") times"
  PGPASSWORD=$secret run --db "postgresql://app@127.0.0.1:$fake_port/app?sslmode=disable&gssencmode=disable" \
    exec --lock jobs.import -- true
  expect_status 77 "exec with a wrong password"
  no_secret "exec with a wrong password"
  kill "$refusing" 2>/dev/null
  wait "$refusing" 2>/dev/null
}

trap 'rm -rf "$dir"' EXIT
case "$mode" in
  sqlite) sqlite_checks ;;
  postgres) postgres_checks ;;
  *) fail "mode must be sqlite or postgres, not '$mode'" ;;
esac
echo "PASS"

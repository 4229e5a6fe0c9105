#!/usr/bin/env bash
# dlmctl(1) in step with dlmctl: the commands and options come from the
# program's own help (dlmctl --help, dlmctl help CMD, recursively for nested
# commands), the page is read from its troff source. Fails, naming each
# thing missing, when
#  - a command (nested ones as "waiters cancel") has no .SS in COMMANDS whose
#    title is exactly its name, or the page has a .SS there for a command
#    dlmctl does not have;
#  - a long option (--xyz) a command's help lists is not named in that
#    command's .SS (the program's own options, --help included: in GLOBAL
#    OPTIONS);
#  - the page does not render cleanly: any message on stderr from
#    `groff -man -ww -z` or from `man --warnings -l`.
# Needs man (man-db) and groff (groff-base); a missing one is a failure.
#
#   man_page_test.sh DLMCTL MANPAGE
set -uo pipefail
if (($# != 2)); then
  echo "usage: $0 DLMCTL MANPAGE" >&2
  exit 2
fi
dlmctl=$1
page=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

[ -x "$dlmctl" ] || fail "$dlmctl is not an executable"
[ -r "$page" ] || fail "cannot read the manual page $page"
command -v groff >/dev/null || fail "groff is not installed (Debian package groff-base)"
command -v man >/dev/null || fail "man is not installed (Debian package man-db)"

problems=()

# --- the program's commands and options, from its help ---------------------

# help_of [WORD...]: the help of the command WORD... (the program's with
# none). Help needs no database.
help_of() {
  if (($# == 0)); then
    "$dlmctl" --help
  else
    "$dlmctl" help "$@"
  fi
}

# section NAME: the lines of the help's "NAME:" block (up to a blank line).
section() {
  awk -v head="$1:" '$0 == head { on = 1; next } on && /^[[:space:]]*$/ { exit } on'
}

# long_options: the --names in the first column of an Options block
# ("  -w,--wait,--timeout S Excludes: --nonblock" gives --wait, --timeout;
# description lines are indented further and do not start with '-').
long_options() {
  section Options | grep -E '^  -' | awk '{ print $1 }' | tr ',' '\n' |
    grep -E '^--[[:alnum:]]' || true
}

# Every command path, breadth first: "exec", ..., "waiters cancel".
commands=()
queue=("")
while ((${#queue[@]} > 0)); do
  path=${queue[0]}
  queue=("${queue[@]:1}")
  read -ra words <<<"$path"
  help_of "${words[@]}" >"$dir/help" 2>"$dir/help.err" ||
    fail "dlmctl ${path:+help }${path:---help} failed: $(cat "$dir/help.err")"
  while read -r sub _; do
    [ -n "$sub" ] || continue
    commands+=("${path:+$path }$sub")
    queue+=("${path:+$path }$sub")
  done < <(section Subcommands <"$dir/help")
  long_options <"$dir/help" >"$dir/options.${path// /_}"
done

# A help whose format changed must not make the checks below vacuous.
((${#commands[@]} >= 5)) || fail "found only ${#commands[@]} commands in dlmctl's help: has its format changed?"
grep -qx -- --lock "$dir/options.exec" 2>/dev/null ||
  fail "found no --lock among exec's options in 'dlmctl help exec': has the help's format changed?"
grep -qx -- --db "$dir/options." ||
  fail "found no --db among the program's options in 'dlmctl --help': has the help's format changed?"

# --- the page's parts, from its source --------------------------------------

# page_part SH [SS]: the text of section SH (only its subsection SS when
# given), with troff's escapes for hyphens, fonts and zero-width breaks
# taken out ("\fB\-\-dry\-run\fP" reads "--dry-run").
page_part() {
  awk -v sh="$1" -v ss="${2-}" -v whole="$(($# < 2))" '
    function title(line) {
      sub(/^\.S[HS][ \t]*/, "", line)
      gsub(/"/, "", line)
      sub(/[ \t]+$/, "", line)
      return line
    }
    /^\.SH/ { cur_sh = title($0); cur_ss = ""; next }
    /^\.SS/ { cur_ss = title($0); next }
    cur_sh == sh && (whole || cur_ss == ss) { print }
  ' "$page" | sed -e 's/\\-/-/g' -e 's/\\f\[[^]]*\]//g' -e 's/\\f([[:alnum:]][[:alnum:]]//g' \
    -e 's/\\f[[:alnum:]]//g' -e 's/\\[&%c]//g'
}

# The .SS titles in COMMANDS, one a line.
awk '
  /^\.SH/ { in_commands = ($0 ~ /^\.SH[ \t]+"?COMMANDS"?[ \t]*$/); next }
  in_commands && /^\.SS/ {
    line = $0
    sub(/^\.SS[ \t]*/, "", line); gsub(/"/, "", line); sub(/[ \t]+$/, "", line)
    print line
  }
' "$page" >"$dir/titles"
[ -s "$dir/titles" ] || problems+=("the page has no .SH COMMANDS with a .SS per command")

# names OPTION FILE: whether FILE names --OPTION as a whole word.
names() { grep -Eq -- "(^|[^[:alnum:]-])$1([^[:alnum:]-]|\$)" "$2"; }

# --- the checks --------------------------------------------------------------

page_part "GLOBAL OPTIONS" >"$dir/part"
[ -s "$dir/part" ] || problems+=("the page has no .SH \"GLOBAL OPTIONS\"")
while read -r option; do
  names "$option" "$dir/part" ||
    problems+=("$option (dlmctl --help) is not in the page's GLOBAL OPTIONS")
done <"$dir/options."

for command in "${commands[@]}"; do
  if ! grep -qxF -- "$command" "$dir/titles"; then
    problems+=("command '$command' has no .SS \"$command\" in the page's COMMANDS")
    continue
  fi
  page_part COMMANDS "$command" >"$dir/part"
  while read -r option; do
    # Every command lists --help; the page says it once, in GLOBAL OPTIONS.
    [ "$option" = --help ] && continue
    names "$option" "$dir/part" ||
      problems+=("$option (dlmctl help $command) is not in the page's .SS \"$command\"")
  done <"$dir/options.${command// /_}"
done

while read -r title; do
  printf '%s\n' "${commands[@]}" | grep -qxF -- "$title" ||
    problems+=("the page's COMMANDS has .SS \"$title\", a command dlmctl's help does not list")
done <"$dir/titles"

# Rendering: groff with every warning, and man as a reader's terminal runs it.
groff -man -ww -z -Tutf8 "$page" >/dev/null 2>"$dir/groff.err"
if [ -s "$dir/groff.err" ]; then
  problems+=("groff -man -ww -z warns: $(cat "$dir/groff.err")")
fi
LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" >/dev/null 2>"$dir/man.err"
if [ -s "$dir/man.err" ]; then
  problems+=("man --warnings -l warns: $(cat "$dir/man.err")")
fi

if ((${#problems[@]} > 0)); then
  echo "FAIL: the manual page $page is not in step with $dlmctl:" >&2
  printf '  %s\n' "${problems[@]}" >&2
  exit 1
fi
options=$(cat "$dir"/options.* | sort -u | wc -l)
echo "dlmctl(1) documents dlmctl's ${#commands[@]} commands and $options distinct long options, and renders without warnings"

#!/usr/bin/env bash
# The failover tests against a real pg_auto_failover formation:
#
#   scripts/ha-test.sh BUILD_DIR
#
# starts a throwaway formation (scripts/pg-auto-failover.sh: a monitor and two
# PostgreSQL 15 nodes with synchronous replication, loopback, in a temporary
# directory, as a non-root user), exports its multi-host URL
# (DLM_TEST_HA_URL, target_session_attrs=read-write) and directory
# (DLM_TEST_HA_DIR), runs the ctest tests labelled "ha" in BUILD_DIR
# (ha_failover: a planned failover and a SIGKILLed primary under a
# multi-process contention run), and stops the formation whatever happens.
# Exits with ctest's status (1 if the formation cannot be started).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:?usage: $0 BUILD_DIR}

ha_dir=$(mktemp -d /tmp/dlm-test-ha.XXXXXX) || exit 1
cleanup() {
  "$root/scripts/pg-auto-failover.sh" stop "$ha_dir" >/dev/null 2>&1 ||
    echo "ha-test: could not stop the formation in $ha_dir" >&2
}
trap cleanup EXIT
trap 'echo "ha-test: interrupted" >&2; exit 130' INT TERM

if ! "$root/scripts/pg-auto-failover.sh" start "$ha_dir"; then
  echo "ha-test: the formation did not start; its logs:" >&2
  tail -n 30 "$ha_dir"/*.log >&2 2>/dev/null
  exit 1
fi
# shellcheck disable=SC1091
. "$ha_dir/env"
export DLM_TEST_HA_URL DLM_TEST_HA_DIR
echo "ha-test: formation up: $DLM_TEST_HA_URL"
ctest --test-dir "$build" --output-on-failure --timeout 600 -L '^ha$'

#!/bin/sh
# on_own_cluster.sh COMMAND [ARG...]: runs a test on the PostgreSQL cluster
# that $DLM_TEST_PG_DIR names (scripts/pg-cluster.sh's directory): its env
# file's PG* variables replace the caller's. The tests run this way restart,
# stop or watch that whole server, so scripts/test.sh gives them a cluster of
# their own and runs them beside the tests on the shared one (ctest takes
# RESOURCE_LOCK dlm_own_cluster: one at a time on it). Fails without one.
if [ -z "${DLM_TEST_PG_DIR:-}" ] || [ ! -f "$DLM_TEST_PG_DIR/env" ]; then
  echo "on_own_cluster.sh: DLM_TEST_PG_DIR must name a cluster started by" \
    "scripts/pg-cluster.sh (scripts/test.sh starts one)" >&2
  exit 1
fi
# shellcheck disable=SC1091
. "$DLM_TEST_PG_DIR/env"
exec "$@"

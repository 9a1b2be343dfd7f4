#!/usr/bin/env bash
# Builds of seen_bloom side by side on ingest: one backend's CPU (perf stat task-clock) per
# tracked 20-row VALUES insert, each run from the same copy of one loaded cluster.
#
# fold_cpu.sh counts every process over pgbench's runs; its rounds move by 15% and more, as
# each run grows the tables it measures. Here every run starts from a copy of the cluster
# as loaded (bench/r3000.sql: 1,000 users of 3,000 items, then 2,000 statements folded in),
# one backend runs `CALL ins(N)` (N statements of 20 rows over 20 users, each committed,
# `synchronous_commit = off`), and only that backend's CPU counts: runs of one build moved by
# about 2% in 5 rounds on the development machine.
#
#   ./bench/ingest_ab.sh [--rounds=R] [--statements=N] LIB.so[:plain] ...
#
# Each LIB.so is a build of seen_bloom.so (copy target/release/... or the installed one
# aside first); ":plain" runs that build with the tracking trigger disabled. Runs alternate
# builds within each round; prints each run and each build's median, in us of CPU per
# statement. The library is preloaded, so every run restarts the cluster; the installed
# seen_bloom.so is put back at the end. Needs perf (linux-perf); a throwaway cluster on
# 127.0.0.1:25491 under target/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/common.sh
source "$ROOT/scripts/common.sh"
ROUNDS=5
STATEMENTS=4000
LIBS=()
for arg in "$@"; do
    case "$arg" in
        --rounds=*) ROUNDS="${arg#*=}" ;;
        --statements=*) STATEMENTS="${arg#*=}" ;;
        -*) echo "usage: $0 [--rounds=R] [--statements=N] LIB.so[:plain] ..." >&2; exit 2 ;;
        *) LIBS+=("$arg") ;;
    esac
done
[ "${#LIBS[@]}" -gt 0 ] || { echo "usage: $0 [--rounds=R] [--statements=N] LIB.so[:plain] ..." >&2; exit 2; }
for lib in "${LIBS[@]}"; do
    [ -f "${lib%:plain}" ] || { echo "no such library: ${lib%:plain}" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "ingest_ab.sh needs perf (apt-get install linux-perf)" >&2; exit 1; }
use_pg_major "${PG_MAJOR:-15}"
INSTALLED="$("$PG_CONFIG" --pkglibdir)/seen_bloom.so"
WORK="$(mktemp -d)"
cp "$INSTALLED" "$WORK/installed.so"
PORT=25491
finish() {
    stop_cluster
    cp "$WORK/installed.so" "$INSTALLED.tmp" && mv "$INSTALLED.tmp" "$INSTALLED"
    rm -rf "$WORK"
}
trap finish EXIT
start_cluster "$(cluster_dir bench-ingest-ab)" "$PORT" "shared_buffers = '512MB'" "max_wal_size = '8GB'" \
    "checkpoint_timeout = '1h'" "shared_preload_libraries = 'seen_bloom'" "seen_bloom.maintenance = off"
q() { "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@"; }
step "Loading r3000: 1,000 users of 3,000 items, tracked, then 2,000 statements folded"
q -f "$ROOT/bench/r3000.sql" >/dev/null
q <<'SQL'
CREATE EXTENSION pg_prewarm;
-- The suite's 20-row statement (bench/suite.py values_script), each committed.
CREATE PROCEDURE ins(n int) LANGUAGE plpgsql AS $$
DECLARE u1 bigint; u2 bigint; i bigint;
BEGIN
  FOR k IN 1..n LOOP
    u1 := 1 + floor(random() * 980)::bigint;
    u2 := 1 + floor(random() * 980)::bigint;
    i := 4000000000 + floor(random() * 5000000000)::bigint;
    INSERT INTO r3000 (user_id, post_id) VALUES (u1, i), (u2 + 1, i + 1), (u1 + 2, i + 2),
      (u2 + 3, i + 3), (u1 + 4, i + 4), (u2 + 5, i + 5), (u1 + 6, i + 6), (u2 + 7, i + 7),
      (u1 + 8, i + 8), (u2 + 9, i + 9), (u1 + 10, i + 10), (u2 + 11, i + 11), (u1 + 12, i + 12),
      (u2 + 13, i + 13), (u1 + 14, i + 14), (u2 + 15, i + 15), (u1 + 16, i + 16),
      (u2 + 17, i + 17), (u1 + 18, i + 18), (u2 + 19, i + 19);
    COMMIT;
  END LOOP;
END $$;
CALL ins(2000);
SQL
DATA="$CLUSTER_DIR/data"
run_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
cp -a "$DATA" "$WORK/loaded"

# One run: the cluster copied back, started with LIB, warmed; us of CPU per statement.
run() {
    local lib="${1%:plain}" pid
    cp "$lib" "$INSTALLED.tmp" && mv "$INSTALLED.tmp" "$INSTALLED"
    run_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$DATA" && cp -a "$WORK/loaded" "$DATA"
    pg_start "$PG_BIN" "$CLUSTER_DIR" >&2
    q -c "SELECT count(pg_prewarm(c)) FROM unnest(ARRAY['r3000_seen', 'r3000_seen_pkey', 'r3000_user_post', 'r3000_pkey']) c" >/dev/null
    if [ "$lib" != "$1" ]; then q -c "ALTER TABLE r3000 DISABLE TRIGGER seen_bloom_insert"; fi
    coproc PSQL { "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -X -q -At -d postgres 2>&1; }
    echo "SET synchronous_commit = off; SELECT pg_backend_pid(); CALL ins(200); SELECT 1;" >&"${PSQL[1]}"
    read -r pid <&"${PSQL[0]}"
    read -r _ <&"${PSQL[0]}"
    perf stat -e task-clock -x, -p "$pid" -o "$WORK/stat" &
    local perf_pid=$!
    sleep 0.2
    echo "CALL ins($STATEMENTS); SELECT 1;" >&"${PSQL[1]}"
    read -r _ <&"${PSQL[0]}"
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    echo '\q' >&"${PSQL[1]}"
    wait "$PSQL_PID" 2>/dev/null || true
    awk -F, -v n="$STATEMENTS" '$3 == "task-clock" {printf "%.1f", $1 * 1000 / n}' "$WORK/stat"
}

step "Rounds: ${LIBS[*]}, $STATEMENTS statements a run"
declare -A runs
for r in $(seq "$ROUNDS"); do
    line="round $r:"
    for lib in "${LIBS[@]}"; do
        us="$(run "$lib")"
        runs[$lib]="${runs[$lib]:-} $us"
        line="$line $(basename "$lib") $us"
    done
    echo "$line"
done
for lib in "${LIBS[@]}"; do
    # shellcheck disable=SC2086 # one run per word
    echo "$(basename "$lib"): median $(printf '%s\n' ${runs[$lib]} | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}') us of CPU per statement"
done

#!/usr/bin/env bash
# Where ingest's time goes: CPU per 20-row VALUES statement, plain and tracked, counted with
# `perf record -a` (all processes but the idle task) over a fixed number of statements, so
# that the machine's other load and pgbench's timing do not enter the figure. The table and
# statement are the suite's writes section's: r3000, 1,000 users of 3,000 items over a 30-day
# window, tracked in layout 3; 2 clients, prepared, 20 rows over 20 users per statement.
# Rounds alternate plain and tracked (the seen_bloom_insert trigger disabled, then enabled).
#
#   ./bench/fold_cpu.sh [ROUNDS] [--no-install] [--symbols]
#
# Prints per round: plain and tracked microseconds of CPU per statement and plain/tracked,
# then the median ratio;
# with --symbols, the 40 symbols whose samples grew most from plain to tracked in the last
# round (the idle task's halt left out). Needs perf (linux-perf); a throwaway cluster on 127.0.0.1:25490 under target/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/common.sh
source "$ROOT/scripts/common.sh"
ROUNDS=3
INSTALL=1
SYMBOLS=""
for arg in "$@"; do
    case "$arg" in
        --no-install) INSTALL="" ;;
        --symbols) SYMBOLS=1 ;;
        [0-9]*) ROUNDS="$arg" ;;
        *) echo "usage: $0 [ROUNDS] [--no-install] [--symbols]" >&2; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "fold_cpu.sh needs perf (apt-get install linux-perf)" >&2; exit 1; }
use_pg_major "${PG_MAJOR:-15}"
if [ -n "$INSTALL" ]; then install_extension; fi
PORT=25490
WORK="$(mktemp -d)"
trap 'stop_cluster; rm -rf "$WORK"' EXIT
start_cluster "$(cluster_dir bench-fold-cpu)" "$PORT" "shared_buffers = '512MB'" "max_wal_size = '8GB'" \
    "max_locks_per_transaction = 1024" "checkpoint_timeout = '1h'" "shared_preload_libraries = 'seen_bloom'"
q() { "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -X -q -At -d postgres "$@"; }
step "Loading r3000: 1,000 users of 3,000 items, tracked"
q -v ON_ERROR_STOP=1 -f "$ROOT/bench/r3000.sql" >/dev/null
{
    echo '\set u1 random(1, 980)'
    echo '\set u2 random(1, 980)'
    echo '\set i random(4000000000, 9000000000)'
    printf 'INSERT INTO r3000 (user_id, post_id) VALUES '
    for k in $(seq 0 19); do
        if [ "$k" -gt 0 ]; then printf ', '; fi
        printf '(:u%d::bigint + %d, :i::bigint + %d)' $((1 + k % 2)) "$k" "$k"
    done
    echo ';'
} >"$WORK/insert.sql"
STATEMENTS=6000
FREQ=2000
profile() { # NAME: perf data of 2 clients x 3,000 statements
    perf record -q -F "$FREQ" -a -o "$WORK/$1.data" -- \
        "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PORT" -U postgres -n -M prepared -c 2 -j 2 \
        -t $((STATEMENTS / 2)) -f "$WORK/insert.sql" postgres >/dev/null 2>&1
}
busy_us() { # NAME: CPU microseconds per statement, the idle task left out
    perf report -i "$WORK/$1.data" --no-children -n --sort comm 2>/dev/null |
        awk -v f="$FREQ" -v n="$STATEMENTS" '!/^#/ && NF >= 3 && $3 != "swapper" {s += $2} END {printf "%.0f", s / f / n * 1e6}'
}
# One pair first, not counted: the first statements warm the caches and the filter pages
# (a scratch run's first pair counted 423 us plain against 287 to 318 after).
step "Rounds: plain, then tracked, $STATEMENTS statements each (after one pair not counted)"
ratios=()
for r in $(seq 0 "$ROUNDS"); do
    q -c "ALTER TABLE r3000 DISABLE TRIGGER seen_bloom_insert"
    profile plain
    q -c "ALTER TABLE r3000 ENABLE TRIGGER seen_bloom_insert"
    profile tracked
    [ "$r" -gt 0 ] || continue
    p="$(busy_us plain)"
    t="$(busy_us tracked)"
    ratios+=("$(awk -v p="$p" -v t="$t" 'BEGIN {printf "%.3f", p / t}')")
    echo "round $r: plain $p us, tracked $t us of CPU per statement; plain/tracked ${ratios[-1]}"
done
echo "median plain/tracked over $ROUNDS rounds: $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')"
if [ -n "$SYMBOLS" ]; then
    for m in plain tracked; do
        perf report -i "$WORK/$m.data" --no-children -n --sort dso,sym -g none 2>/dev/null |
            awk '!/^#/ && NF >= 4 {c = $2; $1 = ""; $2 = ""; print c "\t" $0}' >"$WORK/$m.sym"
    done
    echo "symbols whose samples grew most (tracked - plain, samples at $FREQ Hz):"
    awk -F'\t' 'FNR == NR {p[$2] += $1; next} {t[$2] += $1} END {for (k in t) print t[k] - p[k] "\t" k}' \
        "$WORK/plain.sym" "$WORK/tracked.sym" | grep -v "safe_halt" | sort -rn | awk 'NR <= 40'
fi

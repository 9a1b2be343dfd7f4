#!/usr/bin/env bash
# This build of seen_bloom beside an earlier one, both running at once: bytes per user,
# false positives, `unseen` time, WAL per impression and ingest, measured side by side
# (bench/versus.py says what and how).
#
#   ./bench/versus.sh [--ref=REV] [--quick] [--no-install]
#
#   --ref=REV      the earlier build (default dbdefe4, the last commit of 0.4.0)
#   --quick        small sizes, a few minutes
#   --no-install   use this build as installed in PostgreSQL 15 already
#
# The earlier build is taken from git (git archive REV), built with its own target directory
# (target/versus/target) and installed into a copy of PostgreSQL 15 under target/versus/root:
# PostgreSQL finds its libraries and extension files relative to its programs, so the copy
# and the system's installation each load their own seen_bloom.so. Both steps are skipped
# when target/versus/root already holds a build of REV. Results in target/bench/versus
# (BENCH_OUT): versus.json and VERSUS.md. Clusters on 127.0.0.1:25496 (this build) and
# 25497 (the earlier one), under target/, stopped at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
cd "$ROOT"

REF=dbdefe4
QUICK=""
INSTALL=1
for arg in "$@"; do
    case "$arg" in
        --ref=*) REF="${arg#--ref=}" ;;
        --quick) QUICK=1 ;;
        --no-install) INSTALL="" ;;
        -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
    esac
done
use_pg_major 15
OUT="${BENCH_OUT:-$ROOT/target/bench/versus}"
VENV="$ROOT/target/bench/venv"
VERSUS="$ROOT/target/versus"
BASE_ROOT="$VERSUS/root"
BASE_BIN="$BASE_ROOT/usr/lib/postgresql/15/bin"
COMMIT="$(git rev-parse --short=12 HEAD)"
BASE_COMMIT="$(git rev-parse --short=12 "$REF^{commit}")"

if [ -n "$INSTALL" ]; then
    setup
    install_extension
else
    check_free_space
    ensure_packages
fi
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import redis' 2>/dev/null; then
    step "Creating $VENV (redis-py, which bench/suite.py imports)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "matplotlib==3.9.2" "redis==5.2.1"
fi

if [ "$(cat "$VERSUS/built" 2>/dev/null)" = "$BASE_COMMIT" ] && [ -e "$BASE_ROOT/usr/lib/postgresql/15/lib/seen_bloom.so" ]; then
    note "the earlier build ($BASE_COMMIT) is installed in $BASE_ROOT"
else
    step "Copying PostgreSQL 15 to $BASE_ROOT"
    rm -rf "$BASE_ROOT" "$VERSUS/src" "$VERSUS/built"
    mkdir -p "$BASE_ROOT/usr/lib/postgresql" "$BASE_ROOT/usr/share/postgresql" "$VERSUS/src"
    cp -a "$(dirname "$("$PG_CONFIG" --bindir)")" "$BASE_ROOT/usr/lib/postgresql/15"
    cp -a "$("$PG_CONFIG" --sharedir)" "$BASE_ROOT/usr/share/postgresql/15"
    rm -f "$BASE_ROOT"/usr/lib/postgresql/15/lib/seen_bloom.so "$BASE_ROOT"/usr/share/postgresql/15/extension/seen_bloom*
    [ "$("$BASE_BIN/pg_config" --pkglibdir)" = "$BASE_ROOT/usr/lib/postgresql/15/lib" ] ||
        { echo "the copy of PostgreSQL does not find its own libraries" >&2; exit 1; }
    step "Building seen_bloom at $BASE_COMMIT (release; a first build takes about 6 minutes on 2 cores)"
    ensure_cargo_pgrx
    git archive "$BASE_COMMIT" | tar -x -C "$VERSUS/src"
    (cd "$VERSUS/src" && CARGO_TARGET_DIR="$VERSUS/target" cargo pgrx install --release \
        --pg-config "$BASE_BIN/pg_config" | sed -n '/Installing\|Finished/p')
    echo "$BASE_COMMIT" >"$VERSUS/built"
fi

CONF=("shared_buffers = '512MB'" "max_wal_size = '8GB'" "checkpoint_timeout = '1h'" "autovacuum = off"
      "max_locks_per_transaction = 1024" "shared_preload_libraries = 'seen_bloom'")
BASE_DIR="$(cluster_dir versus-base)"
step "Starting the earlier build's cluster"
PG_BIN="$BASE_BIN" start_cluster "$BASE_DIR" 25497 "${CONF[@]}"
# shellcheck disable=SC2317 # called by the trap
stop_both() {
    run_pg "$BASE_BIN/pg_ctl" -D "$BASE_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    stop_cluster
}
trap stop_both EXIT
step "Starting this build's cluster"
start_cluster "$(cluster_dir versus-current)" 25496 "${CONF[@]}" "seen_bloom.maintenance = off"

step "Measuring ($COMMIT beside $BASE_COMMIT)"
"$VENV/bin/python" "$ROOT/bench/versus.py" --port 25496 --base-port 25497 \
    --pg-bin "$PG_BIN" --base-pg-bin "$BASE_BIN" \
    --pg-data "$CLUSTER_DIR/data" --base-pg-data "$BASE_DIR/data" \
    --base-ref "$BASE_COMMIT" --commit "$COMMIT" --out "$OUT" ${QUICK:+--quick}

#!/usr/bin/env bash
# README command 1: the main job. Set-up as needed, a release build of seen_bloom installed
# into PostgreSQL, a throwaway cluster under target/ on 127.0.0.1, the feed simulation
# (crates/feed-demo: a creator marketplace whose impressions are tracked by seen_bloom, with
# a summary and a re-serve check at the end), cluster stopped.
#
#   ./scripts/demo.sh [--users N] [--days N] [--seed N] [--day-seconds S] [--clients N]
#   ./scripts/demo.sh --dsn 'host=... dbname=...' [flags]   # an existing server with seen_bloom
#                                                           # installed: no set-up, no cluster
#   ./scripts/demo.sh --walkthrough                         # the short SQL tour instead
#
# Flags other than --walkthrough go to the feed-demo binary (docs/DEMO.md lists them).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit 1

DEMO_PORT="${DEMO_PORT:-25490}"
walkthrough=0
own_dsn=0
help=0
args=()
for a in "$@"; do
    case "$a" in
        --walkthrough) walkthrough=1 ;;
        --dsn | --dsn=*) own_dsn=1; args+=("$a") ;;
        -h | --help) help=1; args+=("$a") ;;
        *) args+=("$a") ;;
    esac
done

build_demo() {
    step "Building the feed simulation (cargo build --release -p feed-demo)"
    cargo build --release -q -p feed-demo
}

if [ "$help" -eq 1 ]; then
    command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
    cargo run --release -q -p feed-demo -- --help
    exit 0
fi

if [ "$own_dsn" -eq 1 ]; then
    # An existing server: nothing to install here (seen_bloom must be installed on it, e.g.
    # by a run of this script without --dsn on that machine), no cluster to manage.
    [ "$walkthrough" -eq 0 ] || { echo "--walkthrough runs on the throwaway cluster only; drop --dsn" >&2; exit 2; }
    command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
    build_demo
    step "Feed simulation against the given server"
    cargo run --release -q -p feed-demo -- "${args[@]}"
    exit 0
fi

setup
install_extension
[ "$walkthrough" -eq 1 ] || build_demo
trap stop_cluster EXIT
step "Throwaway cluster"
start_cluster "$(cluster_dir demo-cluster)" "$DEMO_PORT" "shared_preload_libraries = 'seen_bloom'"
cluster_psql -q -d postgres -c "CREATE DATABASE seen_bloom_demo"

if [ "$walkthrough" -eq 1 ]; then
    step "Walk-through of the bloom type and of tracking (demo/walkthrough.sql)"
    cluster_psql -d seen_bloom_demo -v ON_ERROR_STOP=1 -f "$ROOT/demo/walkthrough.sql"
else
    step "Feed simulation (crates/feed-demo; flags: ./scripts/demo.sh --help)"
    cargo run --release -q -p feed-demo -- \
        --dsn "host=127.0.0.1 port=${DEMO_PORT} user=postgres dbname=seen_bloom_demo" "${args[@]}"
fi
step "Done"

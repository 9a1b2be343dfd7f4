#!/usr/bin/env bash
# README command 1: the main job. Set-up as needed, a release build installed into
# PostgreSQL, a throwaway cluster under target/ on 127.0.0.1, the walk-through, cluster stopped.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"

setup
install_extension
trap stop_cluster EXIT
step "Throwaway cluster"
start_cluster "$(cluster_dir demo-cluster)" "${DEMO_PORT:-55432}"
cluster_psql -q -d postgres -c "CREATE DATABASE seen_bloom_demo"
step "Walk-through of the bloom type (demo/walkthrough.sql)"
cluster_psql -d seen_bloom_demo -v ON_ERROR_STOP=1 -f "$ROOT/demo/walkthrough.sql"
step "Done"

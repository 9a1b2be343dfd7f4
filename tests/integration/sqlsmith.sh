#!/usr/bin/env bash
# test.sh: one major (a fuzz run with its own cluster; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# SQLsmith (Debian's sqlsmith, a random SQL generator nobody on the team wrote) against a
# database with bloom values and tracked tables, as a non-superuser role holding the grants
# docs/SECURITY.md documents for a feed service (SELECT and INSERT on the impressions tables,
# SELECT on their filter tables), for SQLSMITH_SECONDS (60; 600 with SEEN_BLOOM_LONG=1).
# Fails on any backend crash (the server log's "terminated by signal"), any "panicked at"
# text, and any XX000 (internal error) raised from the extension's code (LOCATION in a .rs
# file). Prints how many queries ran and how many ended in an error. SQLSMITH_PORT and
# SQLSMITH_CLUSTER: its port and cluster directory name (to run beside the test suite).
# Usage: sqlsmith.sh PG_BIN PORT (PORT unused: the test runs its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
port="${SQLSMITH_PORT:-25468}"
db=seen_bloom_smith
seconds="${SQLSMITH_SECONDS:-60}"
[ "${SEEN_BLOOM_LONG:-0}" = 1 ] && seconds="${SQLSMITH_SECONDS:-600}"
make_work_dir
chmod a+rwx "$WORK"
cluster="$(cluster_dir "${SQLSMITH_CLUSTER:-smith-cluster}")"
log="$cluster/server.log"
command -v sqlsmith >/dev/null || fail "sqlsmith is not installed (scripts/common.sh's ensure_packages installs it)"

cluster_new "$cluster" "$port" "log_line_prefix = '%e '" "log_error_verbosity = verbose" \
    "log_min_error_statement = panic" "restart_after_crash = on"
psql_at "$port" postgres -c "CREATE DATABASE $db"
psql_at "$port" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
INSERT INTO impressions (user_id, post_id) SELECT u, u * 7 + k FROM generate_series(1, 50) u, generate_series(1, 40) k;
CREATE TABLE text_impressions (who text, what text, pct real);
SELECT seen_bloom.track('text_impressions', 'who', 'what', "where" => 'pct >= 0.5');
INSERT INTO text_impressions SELECT 'user-' || u, 'item-' || k, 1 FROM generate_series(1, 20) u, generate_series(1, 30) k;
CREATE TABLE uuid_impressions (who uuid, what uuid);
SELECT seen_bloom.track('uuid_impressions', 'who', 'what');
INSERT INTO uuid_impressions SELECT md5(u::text)::uuid, md5(k::text)::uuid FROM generate_series(1, 10) u, generate_series(1, 10) k;
CREATE TABLE filters (id int PRIMARY KEY, f bloom, ids bigint[], names text[]);
INSERT INTO filters SELECT g, (SELECT bloom_agg(x::bigint) FROM generate_series(1, g * 50) x), ARRAY[g, g + 1]::bigint[],
                           ARRAY['a' || g] FROM generate_series(1, 20) g;
CREATE ROLE smith LOGIN;
GRANT SELECT, INSERT ON impressions, text_impressions, uuid_impressions TO smith;
GRANT SELECT ON impressions_seen, text_impressions_seen, uuid_impressions_seen, filters TO smith;
ALTER ROLE smith SET statement_timeout = '2s';
SQL

note "sqlsmith for ${seconds}s as role smith"
set +e
timeout --signal=INT "$seconds" sqlsmith --verbose --seed=16 \
    --target="host=127.0.0.1 port=$port user=smith dbname=$db" >"$WORK/smith.out" 2>"$WORK/smith.err"
status=$?
set -e
# sqlsmith ends on SIGINT (timeout) or on a lost connection; anything else is its own failure.
if [ "$status" -ne 124 ] && [ "$status" -ne 130 ] && [ "$status" -ne 0 ]; then
    tail -20 "$WORK/smith.err"
    if ! grep -q "terminated by signal\|server closed the connection" "$WORK/smith.err" "$log"; then
        fail "sqlsmith exited with $status"
    fi
fi
queries="$(grep -o 'queries: [0-9]*' "$WORK/smith.err" | tail -1 | grep -o '[0-9]*' || true)"
errors="$(grep -c '^[0-9A-Z]\{5\} ERROR' "$log" || true)"
note "queries: ${queries:-unknown}, errors logged: $errors"
if grep -n "terminated by signal\|was terminated by\|PANIC" "$log"; then
    fail "a backend crashed during the sqlsmith run (server log above)"
fi
if grep -n "panicked at" "$log" "$WORK/smith.err"; then
    fail "a Rust panic surfaced during the sqlsmith run"
fi
# XX000 lines, each followed by its LOCATION: ours are in .rs files.
if grep -A2 '^XX000 ' "$log" | grep -B2 'LOCATION: .*\.rs:' | head -20 | grep .; then
    fail "the extension raised XX000 (internal error) during the sqlsmith run"
fi
if [ -z "$queries" ] || [ "$queries" -eq 0 ]; then
    fail "sqlsmith ran no queries (its output: $(tail -3 "$WORK/smith.err"))"
fi
echo "OK: sqlsmith ran $queries queries in ${seconds}s: no crash, no panic, no XX000 from the extension"

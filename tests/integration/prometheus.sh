#!/usr/bin/env bash
# test.sh: one major (the exporter and the queries file do not depend on the major)
# docs/monitoring/seen_bloom_queries.yaml under Debian 12's prometheus-postgres-exporter: a
# cluster of its own with seen_bloom in shared_preload_libraries (127.0.0.1:25481) and the
# exporter on 127.0.0.1:25482 (its binary taken from the Debian package with apt-get download
# and dpkg-deb into /var/cache/seen_bloom as root, ~/.cache/seen_bloom otherwise, so no service
# is installed or started; common.sh's shared_cache_dir). Checks:
#   - seen_bloom.activity counts what a known workload did: 3 folds of 120 impressions (and
#     2 rows skipped), 4 unseen calls over 10 candidates of which 6 were seen, 2 has_seen;
#   - /metrics shows each as seen_bloom_activity_* with those values, the filter table's
#     size and rows (seen_bloom_filter_*) and seen_bloom_health_problems 0;
#   - a disabled trigger shows as seen_bloom_health_problems 1;
#   - seen_bloom.activity_reset zeroes the table's counters;
#   - seen_bloom.track_activity = off stops counting;
#   - a per-user cap's refusals are counted (impressions_capped, capped_folds) and health()
#     names the capped user while the cap stands.
# Usage: prometheus.sh PG_BIN PORT (PORT unused: the test runs its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
pg_port=25481
exporter_port=25482
db=seen_bloom_metrics
queries="$ROOT/docs/monitoring/seen_bloom_queries.yaml"

# The exporter runs as the postgres user (when we are root), so neither it nor the queries
# file may be read from the checkout, which that user may not be able to enter: the binary is
# kept in shared_cache_dir (outside the checkout, fetched once a machine), the queries file is
# copied into the cluster's directory below.
exporter="$(command -v prometheus-postgres-exporter || true)"
if [ -z "$exporter" ]; then
    exporter_dir="$(shared_cache_dir prometheus-postgres-exporter)"
    exporter="$exporter_dir/usr/bin/prometheus-postgres-exporter"
    if [ ! -x "$exporter" ]; then
        step "Fetching Debian's prometheus-postgres-exporter (apt-get download, unpacked into $exporter_dir)"
        fetch="$exporter_dir.fetch.$$"
        rm -rf "$fetch"
        mkdir -p "$fetch"
        on_exit rm -rf "$fetch"
        (cd "$fetch" && apt-get download prometheus-postgres-exporter >/dev/null 2>&1) ||
            { as_root apt-get update -q >/dev/null && (cd "$fetch" && apt-get download prometheus-postgres-exporter >/dev/null 2>&1); } ||
            fail "apt-get download prometheus-postgres-exporter failed"
        dpkg-deb -x "$fetch"/prometheus-postgres-exporter_*.deb "$fetch"
        rm -rf "${exporter_dir:?}/usr"
        mv "$fetch/usr" "$exporter_dir/usr"
    fi
fi
note "exporter: $("$exporter" --version 2>&1 | head -1)"

dir="$(cluster_dir prometheus)"
cluster_new "$dir" "$pg_port" "shared_preload_libraries = 'seen_bloom'"
show_log_on_fail "$dir/server.log"
install -m 644 "$queries" "$dir/seen_bloom_queries.yaml"
psql_at "$pg_port" postgres -c "CREATE DATABASE $db" >/dev/null
sql() { psql_at "$pg_port" "$db" "$@"; }
sql -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
SELECT seen_bloom.activity_reset();
INSERT INTO impressions (user_id, post_id) SELECT g % 10, g FROM generate_series(1, 100) g;
INSERT INTO impressions (user_id, post_id) SELECT 1, 1000 + g FROM generate_series(1, 20) g;
INSERT INTO impressions (user_id, post_id, seen_at) VALUES (NULL, 1, now()), (2, 5000, now() - interval '40 days');
SELECT seen_bloom.unseen('impressions', 1::bigint, ARRAY[1, 11, 21, 7]::bigint[]);
SELECT seen_bloom.unseen('impressions', 1::bigint, ARRAY[1001, 1002, 9999]::bigint[]);
SELECT seen_bloom.unseen('impressions', 2::bigint, ARRAY[2, 3]::bigint[]);
SELECT seen_bloom.unseen('impressions', 3::bigint, ARRAY[]::bigint[]);
SELECT seen_bloom.has_seen('impressions', 5::bigint, 5::bigint), seen_bloom.has_seen('impressions', 5::bigint, 6::bigint);
SQL
# Candidates 10: seen 1, 11, 21 | 1001, 1002 | 2 = 6; plus has_seen: 5 seen, 6 not.
want="3|120|2|4|2|11|7|4"
got="$(sql -At -c "SELECT folds, impressions_folded, rows_skipped, unseen_calls, has_seen_calls, candidates_in, candidates_seen, candidates_returned
                   FROM seen_bloom.activity WHERE impressions = 'impressions'::regclass")"
[ "$got" = "$want" ] || fail "seen_bloom.activity: folds|impressions|skipped|unseen|has_seen|in|seen|returned = $got, want $want"
note "seen_bloom.activity counted the workload: $got"

log="$dir/exporter.log"
run_pg env DATA_SOURCE_NAME="host=127.0.0.1 port=$pg_port user=postgres dbname=$db sslmode=disable" \
    "$exporter" --web.listen-address="127.0.0.1:$exporter_port" --extend.query-path="$dir/seen_bloom_queries.yaml" \
    --disable-settings-metrics >"$log" 2>&1 &
exporter_pid=$!
on_exit stop_process "$exporter_pid"
show_log_on_fail "$log"
metrics() { curl -fsS "http://127.0.0.1:$exporter_port/metrics"; }
wait_until 30 metrics >/dev/null 2>&1 || fail "the exporter did not answer on 127.0.0.1:$exporter_port"
# metric NAME: the value of the series of NAME labelled impressions="impressions".
metric() {
    metrics | awk -v name="$1" '$1 ~ "^" name "\\{" && $1 ~ /impressions="impressions"/ { print $2 }'
}
check_metric() { # NAME WANT
    local got
    got="$(metric "$1")"
    [ -n "$got" ] || fail "/metrics has no $1 for the tracked table"
    awk -v g="$got" -v w="$2" 'BEGIN { exit !(g + 0 == w + 0) }' || fail "$1 = $got, want $2"
}
check_metric seen_bloom_activity_folds 3
check_metric seen_bloom_activity_impressions_folded 120
check_metric seen_bloom_activity_rows_skipped 2
check_metric seen_bloom_activity_unseen_calls 4
check_metric seen_bloom_activity_has_seen_calls 2
check_metric seen_bloom_activity_candidates_in 11
check_metric seen_bloom_activity_candidates_seen 7
check_metric seen_bloom_activity_candidates_returned 4
check_metric seen_bloom_health_problems 0
bytes="$(sql -At -c "SELECT pg_total_relation_size('impressions_seen')")"
check_metric seen_bloom_filter_bytes "$bytes"
[ -n "$(metric seen_bloom_activity_read_seconds)" ] || fail "/metrics has no seen_bloom_activity_read_seconds"
note "/metrics: seen_bloom_activity_*, seen_bloom_filter_bytes ($bytes) and seen_bloom_health_problems match"

sql -o /dev/null -c "ALTER TABLE impressions DISABLE TRIGGER seen_bloom_insert"
check_metric seen_bloom_health_problems 1
sql -o /dev/null -c "ALTER TABLE impressions ENABLE TRIGGER seen_bloom_insert"
note "a disabled trigger shows as seen_bloom_health_problems 1"

sql -o /dev/null -c "SELECT seen_bloom.activity_reset('impressions')"
check_metric seen_bloom_activity_unseen_calls 0
sql -o /dev/null -c "SET seen_bloom.track_activity = off" \
    -c "SELECT seen_bloom.unseen('impressions', 1::bigint, ARRAY[1]::bigint[])" \
    -c "INSERT INTO impressions (user_id, post_id) VALUES (1, 77)"
check_metric seen_bloom_activity_unseen_calls 0
check_metric seen_bloom_activity_folds 0
note "activity_reset zeroes the counters; track_activity = off counts nothing"

# The per-user cap (seen_bloom.set_user_cap): the impressions it keeps out of a user's
# filter are counted, and health() names the user. Of 1,000 items one user is offered past a
# cap of 100, what the filter holds and what was refused make the 1,000 (plus the few false
# positives among the refused); 50 of another user are all taken.
sql -o /dev/null -c "SELECT seen_bloom.activity_reset('impressions')" -c "SELECT seen_bloom.set_user_cap('impressions', 100)"
sql -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT 42, 100000 + g FROM generate_series(1, 1000) g"
sql -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT 43, 200000 + g FROM generate_series(1, 50) g"
IFS='|' read -r folded capped capped_folds <<<"$(sql -At -c "SELECT impressions_folded, impressions_capped, capped_folds
                                                             FROM seen_bloom.activity WHERE impressions = 'impressions'::regclass")"
held="$(sql -At -c "SELECT count(*) FILTER (WHERE seen_bloom.has_seen('impressions', 42::bigint, 100000 + g)) FROM generate_series(1, 1000) g")"
held_43="$(sql -At -c "SELECT count(*) FILTER (WHERE seen_bloom.has_seen('impressions', 43::bigint, 200000 + g)) FROM generate_series(1, 50) g")"
[ "$folded" = 1050 ] || fail "impressions_folded = $folded, want 1050"
[ "$capped_folds" = 1 ] || fail "capped_folds = $capped_folds, want 1 (user 42's one fold)"
[ "$held_43" = 50 ] || fail "user 43, under the cap, holds $held_43 of its 50 items"
{ [ "$held" -ge 90 ] && [ "$held" -le 110 ]; } || fail "a cap of 100 left $held of 1,000 items in the filter"
total=$((held + capped))
{ [ "$total" -ge 1000 ] && [ "$total" -le 1010 ]; } || fail "held $held + capped $capped = $total, want 1,000 (+ false positives)"
check_metric seen_bloom_activity_impressions_capped "$capped"
check_metric seen_bloom_activity_capped_folds 1
check_metric seen_bloom_health_problems 1
sql -o /dev/null -c "SELECT seen_bloom.set_user_cap('impressions', NULL)"
check_metric seen_bloom_health_problems 0
note "user_cap 100: user 42 holds $held of 1,000 items, $capped counted capped, health names it until the cap goes"

# Who sees a table's counters (docs/SECURITY.md): a role with some right on the table, not
# one without. Here, where the counters are live (the suite's main cluster has no preload).
sql -o /dev/null -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS sb_metrics_reader" \
    -c "CREATE ROLE sb_metrics_reader"
rows_seen_by_reader() {
    sql -qAt -c "SET ROLE sb_metrics_reader" \
        -c "SELECT count(*) FROM seen_bloom.activity WHERE impressions::oid = 'impressions'::regclass::oid"
}
[ "$(sql -At -c "SELECT count(*) FROM seen_bloom.activity WHERE impressions = 'impressions'::regclass")" = 1 ] ||
    fail "seen_bloom.activity shows postgres no row of the table"
[ "$(rows_seen_by_reader)" = 0 ] || fail "seen_bloom.activity shows a role without a right on the table its counters"
sql -o /dev/null -c "GRANT INSERT ON impressions TO sb_metrics_reader"
[ "$(rows_seen_by_reader)" = 1 ] || fail "seen_bloom.activity hides the table's counters from a role granted INSERT on it"
sql -o /dev/null -c "REVOKE ALL ON impressions FROM sb_metrics_reader" -c "DROP ROLE sb_metrics_reader"
note "seen_bloom.activity: a role sees a table's counters only with a right on the table"
echo "PASS prometheus.sh"

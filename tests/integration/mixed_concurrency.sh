#!/usr/bin/env bash
# test.sh: one major (a long fault or replication test; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# Mixed concurrency: 16 pgbench clients for a bounded time (20 s; SEEN_BLOOM_LONG=1: 120 s) on
# 500 overlapping users, mixing
#   - 20-row impression batches over 20 users (weight 6),
#   - a 10-row batch for one user, then in the same transaction seen_bloom.unseen of those ids,
#     which must come back empty (read-your-writes; weight 2),
#   - seen_bloom.unseen of 1,000 candidates for a user (the feed read; weight 3),
#   - has_seen of the 200 latest committed impressions, whoever wrote them: every one visible
#     must be seen (weight 1).
# A failed check divides by zero, so pgbench stops with an error; pgbench exits non-zero on any
# error (a deadlock included). Afterwards: pg_stat_database shows no deadlock, and every
# committed impression is reported seen.
# Usage: mixed_concurrency.sh PG_BIN PORT [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
seconds="${3:-${MIXED_SECONDS:-20}}"
[ "${SEEN_BLOOM_LONG:-0}" = 1 ] && seconds="${3:-${MIXED_SECONDS:-120}}"
clients=16
users=500
db=seen_bloom_mixed
make_work_dir

recreate_database "$PORT" "$db"
psql_at "$PORT" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
SQL

pgbench_insert_script "$users" 23 >"$WORK/insert.sql"
{
    echo "\\set u random(1, $users)"
    echo '\set p random(1, 1000000000)'
    echo 'BEGIN;'
    printf 'INSERT INTO impressions (user_id, post_id) VALUES '
    for k in $(seq 0 9); do
        [ "$k" -gt 0 ] && printf ', '
        printf '(:u, :p + %d)' "$k"
    done
    echo ';'
    printf "SELECT 1 / (cardinality(seen_bloom.unseen('impressions', :u::bigint, ARRAY["
    for k in $(seq 0 9); do
        [ "$k" -gt 0 ] && printf ', '
        printf ':p + %d' "$k"
    done
    echo ']::bigint[])) = 0)::int AS own_impressions_seen;'
    echo 'COMMIT;'
} >"$WORK/insert_read.sql"
cat >"$WORK/read.sql" <<SQL
\\set u random(1, $users)
\\set c random(1, 1000000000)
SELECT cardinality(seen_bloom.unseen('impressions', :u::bigint, ARRAY(SELECT :c + g FROM generate_series(1, 1000) g)));
SQL
cat >"$WORK/recent.sql" <<'SQL'
SELECT 1 / (count(*) FILTER (WHERE NOT seen_bloom.has_seen('impressions', user_id, post_id)) = 0)::int AS recent_seen
FROM impressions WHERE id > (SELECT coalesce(max(id), 0) FROM impressions) - 200;
SQL

echo "    $clients clients for ${seconds}s over $users users: 20-row batches (6), 10-row batch + read own (2), unseen of 1,000 (3), recent 200 seen (1)"
status=0
client_at "$PORT" pgbench -n -c "$clients" -j 2 -T "$seconds" \
    -f "$WORK/insert.sql@6" -f "$WORK/insert_read.sql@2" -f "$WORK/read.sql@3" -f "$WORK/recent.sql@1" \
    "$db" >"$WORK/pgbench.out" 2>&1 || status=$?
if [ "$status" -ne 0 ] || grep -q "aborted\|ERROR" "$WORK/pgbench.out"; then
    cat "$WORK/pgbench.out"
    fail "pgbench reported an error (exit $status)"
fi
grep -E "^number of transactions actually processed|^number of failed|^latency average|^tps|^SQL script|^ - [0-9]+ transactions" "$WORK/pgbench.out" | sed "s|$WORK/||; s/^/    /"

# Statistics of the test database: backends flush them when they exit (pgbench's have).
sleep 1
stats="$(psql_at "$PORT" "$db" -At -c "SELECT deadlocks, xact_rollback FROM pg_stat_database WHERE datname = current_database()")"
deadlocks="${stats%%|*}"
rollbacks="${stats##*|}"
result="$(psql_at "$PORT" "$db" -At -c "$IMPRESSIONS_SEEN_SQL")"
IFS='|' read -r total missing users_seen <<<"$result"
echo "    deadlocks: $deadlocks, rolled back transactions: $rollbacks"
echo "    impressions committed: $total over $users_seen users, not reported seen: $missing"
if [ "$deadlocks" -ne 0 ] || [ "$rollbacks" -ne 0 ]; then
    fail "deadlocks or rolled back transactions during the run"
fi
if [ "$total" -lt 1000 ] || [ "$missing" -ne 0 ]; then
    fail "expected at least 1,000 impressions, all seen"
fi
psql_at "$PORT" postgres -c "DROP DATABASE $db"
echo "    ok"

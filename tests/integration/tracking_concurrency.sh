#!/usr/bin/env bash
# Concurrency of impression tracking: 10 clients insert 20-row batches for overlapping users
# and read with seen_bloom.unseen (4 inserts to 1 read) for a bounded time, while
# seen_bloom.rebuild repairs every user up to 3 times; then every committed
# impression must be reported seen. pgbench stops on any error (a deadlock included), and
# this script exits non-zero on any failure.
# Usage: tracking_concurrency.sh PG_BIN PORT [SECONDS]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
seconds="${3:-${CONCURRENCY_SECONDS:-15}}"
db=seen_bloom_concurrency
make_work_dir

recreate_database "$PORT" "$db"
psql_at "$PORT" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
SQL

# 20 rows over users 1..40, so concurrent batches keep hitting the same users and rows.
pgbench_insert_script 40 7 >"$WORK/insert.sql"
cat >"$WORK/read.sql" <<'SQL'
\set u random(1, 40)
SELECT cardinality(seen_bloom.unseen('impressions', :u::bigint, ARRAY(SELECT generate_series(1, 1000)::bigint)));
SQL

echo "    10 clients, 4 insert batches to 1 read, for ${seconds}s; rebuilds of every user meanwhile"
client_at "$PORT" pgbench -n -c 10 -j 2 -T "$seconds" \
    -f "$WORK/insert.sql@4" -f "$WORK/read.sql@1" "$db" >"$WORK/pgbench.out" 2>&1 &
bench=$!
stop_bench() { stop_process "$bench"; }
on_exit stop_bench
# The repair job runs against live traffic: it must neither deadlock with the triggers nor
# lose their impressions.
rebuilds=0
sleep 2
while kill -0 "$bench" 2>/dev/null && [ "$rebuilds" -lt 3 ]; do
    psql_at "$PORT" "$db" -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')"
    rebuilds=$((rebuilds + 1))
    sleep 1
done
wait "$bench" || {
    cat "$WORK/pgbench.out"
    fail "pgbench reported an error"
}
bench=""
echo "    rebuilds of every user during the run: $rebuilds"
grep -E "number of transactions actually processed|number of failed" "$WORK/pgbench.out" | sed 's/^/    /'

# Every impression (one unseen call per user: has_seen per row over 1,000,000 rows took 90 s
# of CI a major), and has_seen on every 50th row.
result="$(psql_at "$PORT" "$db" -At -c "
SELECT seen.impressions, seen.missing, sample.n, sample.missing
FROM ($IMPRESSIONS_SEEN_SQL) AS seen(impressions, missing, users),
     (SELECT count(*), count(*) FILTER (WHERE NOT seen_bloom.has_seen('impressions', user_id, post_id))
      FROM impressions WHERE id % 50 = 0) AS sample(n, missing)")"
IFS='|' read -r total missing sampled sampled_missing <<<"$result"
echo "    impressions committed: $total, not reported seen: $missing; has_seen of $sampled: $sampled_missing unseen"
if [ "$total" -lt 1000 ] || [ "$missing" -ne 0 ] || [ "$sampled" -lt 20 ] || [ "$sampled_missing" -ne 0 ]; then
    fail "expected at least 1,000 impressions, all seen"
fi
psql_at "$PORT" postgres -c "DROP DATABASE $db"
echo "    ok"

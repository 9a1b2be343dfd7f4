#!/usr/bin/env bash
# Concurrency of impression tracking: 10 clients insert 20-row batches for overlapping users
# and read with seen_bloom.unseen (4 inserts to 1 read) for a bounded time, while
# seen_bloom.rebuild repairs every user up to 3 times; then every committed
# impression must be reported seen. pgbench stops on any error (a deadlock included), and
# this script exits non-zero on any failure.
# Usage: tracking_concurrency.sh PG_BIN PORT [SECONDS]
set -euo pipefail
pg_bin="$1"
port="$2"
seconds="${3:-${CONCURRENCY_SECONDS:-15}}"
db=seen_bloom_concurrency
psql() { "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres "$@"; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

psql -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
psql -d "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
SQL

# 20 rows over users 1..40, so concurrent batches keep hitting the same users and rows.
{
    echo '\set u random(1, 40)'
    echo '\set p random(1, 1000000000)'
    printf 'INSERT INTO impressions (user_id, post_id) VALUES '
    for k in $(seq 0 19); do
        [ "$k" -gt 0 ] && printf ', '
        printf '((:u + %d * 7) %% 40 + 1, :p + %d)' "$k" "$k"
    done
    echo ';'
} >"$work/insert.sql"
cat >"$work/read.sql" <<'SQL'
\set u random(1, 40)
SELECT cardinality(seen_bloom.unseen('impressions', :u::bigint, ARRAY(SELECT generate_series(1, 1000)::bigint)));
SQL

echo "    10 clients, 4 insert batches to 1 read, for ${seconds}s; rebuilds of every user meanwhile"
"$pg_bin/pgbench" -n -h 127.0.0.1 -p "$port" -U postgres -c 10 -j 2 -T "$seconds" \
    -f "$work/insert.sql@4" -f "$work/read.sql@1" "$db" >"$work/pgbench.out" 2>&1 &
bench=$!
# The repair job runs against live traffic: it must neither deadlock with the triggers nor
# lose their impressions.
rebuilds=0
sleep 2
while kill -0 "$bench" 2>/dev/null && [ "$rebuilds" -lt 3 ]; do
    psql -d "$db" -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')"
    rebuilds=$((rebuilds + 1))
    sleep 1
done
wait "$bench" || {
    cat "$work/pgbench.out"
    echo "FAIL: pgbench reported an error"
    exit 1
}
echo "    rebuilds of every user during the run: $rebuilds"
grep -E "number of transactions actually processed|number of failed" "$work/pgbench.out" | sed 's/^/    /'

result="$(psql -d "$db" -At -c "
SELECT count(*), count(*) FILTER (WHERE NOT seen_bloom.has_seen('impressions', user_id, post_id))
FROM impressions")"
total="${result%%|*}"
missing="${result##*|}"
echo "    impressions committed: $total, not reported seen: $missing"
if [ "$total" -lt 1000 ] || [ "$missing" -ne 0 ]; then
    echo "FAIL: expected at least 1,000 impressions, all seen"
    exit 1
fi
psql -d postgres -c "DROP DATABASE $db"
echo "    ok"

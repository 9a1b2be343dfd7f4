#!/usr/bin/env bash
# test.sh: one major (a timed test with writers)
# CALL seen_bloom.compact, again and again, while 4 pgbench clients insert 20-row batches over
# 40 users, 10 of whom already hold 20,000 items each over the window (layered rows past
# compact's 64 KB):
#   - every compaction commits while the writers run, and none of the writers fails;
#   - compact(min_bytes => 0) takes every user with layered rows, so each round meets users
#     the writers are folding into;
#   - afterwards every committed impression is seen, the heavy users each have one compacted
#     row (plus the layered rows of batches since the last round), and fresh ids pass at
#     most at the table's error rate;
#   - a last compact and a rebuild agree: both hold every impression.
# Usage: compact.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_compact
seconds=15
make_work_dir
bench=""
stop_bench() { stop_process "$bench"; }
on_exit stop_bench
recreate_database "$PORT" "$db"
q() { psql_at "$PORT" "$db" -At "$@"; }
q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON impressions (user_id);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
INSERT INTO impressions (user_id, post_id, seen_at)
SELECT u, 3000000000 + u * 100000 + k, now() - (k::float8 / 20000) * interval '29 days'
FROM generate_series(1, 10) u, generate_series(1, 20000) k;
SQL
heavy="$(q -c "SELECT count(*) FROM (SELECT user_key FROM impressions_seen GROUP BY 1 HAVING sum(length(bits)) > 65536) s")"
[ "$heavy" = 10 ] || fail "$heavy users over 64 KB of layered rows before the test, expected 10"

pgbench_insert_script 40 7 >"$WORK/insert.sql"
client_at "$PORT" pgbench -n -c 4 -j 2 -T "$seconds" -f "$WORK/insert.sql" "$db" >"$WORK/pgbench.out" 2>&1 &
bench=$!
sleep 1
rounds=0
compacted_users=0
started=$SECONDS
while kill -0 "$bench" 2>/dev/null && [ $((SECONDS - started)) -lt $((seconds - 2)) ]; do
    # The first round: compact's own choice (the 10 heavy users); then every user with rows.
    min_bytes=$([ "$rounds" = 0 ] && echo 65536 || echo 0)
    out="$(q -c "CALL seen_bloom.compact('impressions', $min_bytes)" 2>&1)" || { echo "$out"; fail "compact failed under the writers"; }
    n="$(sed -n 's/.*compact([^)]*): \([0-9]*\) users$/\1/p' <<<"$out")"
    [ -n "$n" ] || { echo "$out"; fail "compact printed no count of users"; }
    if [ "$rounds" = 0 ] && [ "$n" -lt 10 ]; then fail "the first compact took $n users, expected the 10 heavy ones"; fi
    compacted_users=$((compacted_users + n))
    rounds=$((rounds + 1))
    sleep 0.5
done
wait "$bench" || { cat "$WORK/pgbench.out"; fail "a writer failed"; }
bench=""
batches="$(pgbench_transactions "$WORK/pgbench.out")"
note "$rounds compactions under the writers ($compacted_users users in all), $batches batches of 20 written"
[ "$rounds" -ge 3 ] || fail "only $rounds compactions ran under the writers"
[ "$batches" -gt 100 ] || fail "the writers wrote only $batches batches"

all_seen="SELECT missing FROM ($IMPRESSIONS_SEEN_SQL) AS seen(impressions, missing, users)"
IFS='|' read -r rows missed _ <<<"$(q -c "$IMPRESSIONS_SEEN_SQL")"
with_compacted="$(q -c "SELECT count(DISTINCT user_key) FROM impressions_seen WHERE layer = -2")"
note "$rows impressions, $missed not seen; $with_compacted users with a compacted row"
[ "$missed" = 0 ] || fail "$missed committed impressions are not seen after compacting under writers"
[ "$with_compacted" -ge 10 ] || fail "only $with_compacted users have a compacted row"
# Fresh ids against each heavy user: at most the table's 1% (the compacted row is sized at 0.5%).
fresh="$(q -c "SELECT max(100000 - cardinality(seen_bloom.unseen('impressions', u,
                  ARRAY(SELECT (9000000000 + g)::bigint FROM generate_series(1, 100000) g))))
               FROM generate_series(1::bigint, 10) u")"
note "most false positives of a heavy user: $fresh in 100,000 fresh ids"
[ "$fresh" -le 1000 ] || fail "a heavy user passes $fresh of 100,000 fresh ids, over 1%"

# Once more without writers, then against a rebuild: both hold every impression.
q -c "SET client_min_messages = warning" -c "CALL seen_bloom.compact('impressions', 0)" >/dev/null
[ "$(q -c "$all_seen")" = 0 ] || fail "impressions unseen after the last compact"
[ "$(q -c "SELECT count(*) FROM impressions_seen WHERE layer <> -2")" = 0 ] || fail "layered rows left after compact(min_bytes => 0) without writers"
q -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')" >/dev/null
[ "$(q -c "$all_seen")" = 0 ] || fail "impressions unseen after the rebuild"
[ "$(q -c "SELECT count(*) FROM impressions_seen WHERE layer = -2")" = 0 ] || fail "compacted rows left after a rebuild"
echo "OK: $rounds compactions under 4 writers, every committed impression seen, fresh ids at most $fresh in 100,000"

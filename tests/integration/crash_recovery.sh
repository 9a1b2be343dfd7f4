#!/usr/bin/env bash
# test.sh: one major (a long fault or replication test; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# Crash recovery of impression tracking, with full durability (fsync on, synchronous commit,
# full-page writes, data checksums) on a cluster of its own (127.0.0.1:25460), with seen_bloom
# preloaded and wal_consistency_checking = 'all': replay fails on any "inconsistent page".
# Each round: 8 pgbench clients insert 20-row batches over overlapping users; after a random
# 2-4 s, kill -9 the postmaster (odd rounds; then restart it) or one active backend chosen from
# pg_stat_activity (even rounds; the postmaster resets and recovers by itself). Then:
#   - no acknowledged commit is lost: the rows added are at least 20 x the transactions pgbench
#     saw committed,
#   - every committed impression is reported seen (one query over the impressions table),
#   - the filter answers exactly as after CALL seen_bloom.rebuild (seen_bloom.unseen over each
#     user's items plus 1,000 never-seen ids), and its rows are the rebuilt ones: exact rows
#     equal as sets of hashes; layer rows (40 users hold 300 items, so layout 3 writes their
#     layer rows in place at commit) hold every rebuilt bit, and extra bits only from
#     transactions the crash lost after their in-place writes reached the WAL (counted),
# and at the end (after one more recovery, from an immediate stop) amcheck (B-tree + heap) finds nothing, pg_checksums verifies every page after a
# clean stop, and the server log holds no corruption marker. 5 rounds (SEEN_BLOOM_LONG=1: 12).
# Usage: crash_recovery.sh PG_BIN PORT (PORT unused: the test runs its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
port=25460
rounds="${CRASH_ROUNDS:-5}"
[ "${SEEN_BLOOM_LONG:-0}" = 1 ] && rounds="${CRASH_ROUNDS:-12}"
clients=8
# Users and a rate cap (batches/s over all clients) that keep every user's window within its
# first filter layer (at most ~85 items per user on average: an exact row up to ~40 items, then
# one layer of ~140 at the default shape), where the rows a rebuild writes do not depend on the
# order the items came in: the rebuilt rows must then equal the crash-recovered ones exactly.
# (Past the first layer, which layer an item lands in depends on insertion order.)
users=$((700 * rounds))
rate=600
db=seen_bloom_crash
make_work_dir
cluster="$(cluster_dir rel-crash)"
data="$cluster/data"
log="$cluster/server.log"
show_log_on_fail "$log"

cluster_new "$cluster" "$port" "fsync = on" "synchronous_commit = on" "full_page_writes = on" \
    "max_connections = 40" "restart_after_crash = on" "checkpoint_timeout = 30s" "max_wal_size = 128MB" \
    "log_checkpoints = on" "${CHECKED_WAL_CONF[@]}"
bench=""
stop_bench() { stop_process "$bench"; }
on_exit stop_bench
# Data checksums, so that a torn or corrupt page shows up in reads and in pg_checksums.
cluster_stop "$cluster"
cluster_enable_checksums "$cluster"
cluster_start "$cluster"
{ [ "$(psql_at "$port" postgres -At -c 'SHOW fsync')" = on ] && [ "$(psql_at "$port" postgres -At -c 'SHOW data_checksums')" = on ]; } ||
    fail "expected fsync and data checksums on"

psql_at "$port" postgres -c "CREATE DATABASE $db"
psql_at "$port" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE EXTENSION amcheck;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON impressions (user_id);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
-- Heavy enough for a layer row each (an exact row holds 192 items), few enough for one layer.
INSERT INTO impressions (user_id, post_id) SELECT u, 3000000000 + u * 1000 + k FROM generate_series(1, 40) u, generate_series(1, 300) k;
SQL
[ "$(psql_at "$port" "$db" -At -c "SELECT count(*) FROM impressions_seen WHERE layer = 0")" -ge 40 ] || fail "the heavy users have no layer rows"

# 20 rows over 20 users spread over 1..users: concurrent batches keep meeting on users.
pgbench_insert_script "$users" 197 >"$WORK/insert.sql"

# What the filter answers for every user: its own items and 1,000 ids nobody saw.
answers() {
    cat <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS $1;
CREATE TABLE $1 AS
SELECT user_id, seen_bloom.unseen('impressions', user_id,
           array_agg(post_id ORDER BY post_id) || ARRAY(SELECT (2000000000 + g)::bigint FROM generate_series(1, 1000) g)) AS unseen
FROM impressions GROUP BY user_id;
DROP TABLE IF EXISTS ${1}_rows;
CREATE TABLE ${1}_rows AS
SELECT user_key, generation, layer, segment,
       CASE WHEN layer < 0 THEN (SELECT string_agg(h, '' ORDER BY h)
                                 FROM (SELECT encode(substr(bits, 8 * i + 1, 8), 'hex') AS h
                                       FROM generate_series(0, length(bits) / 8 - 1) i) s)
            ELSE encode(bits, 'hex') END AS canonical
FROM impressions_seen;
SQL
}

# Whether the killed postmaster's children ($children) have exited; whether pgbench has.
children_gone() {
    local c
    for c in $children; do if kill -0 "$c" 2>/dev/null; then return 1; fi; done
}
bench_gone() { ! kill -0 "$bench" 2>/dev/null; }

total_acked=0
load_total=0
total_lost=0
for round in $(seq 1 "$rounds"); do
    before="$(psql_at "$port" "$db" -At -c "SELECT count(*) FROM impressions")"
    client_at "$port" pgbench -n -c "$clients" -j 2 -R "$rate" -T 60 -f "$WORK/insert.sql" "$db" \
        >"$WORK/pgbench.$round.out" 2>&1 &
    bench=$!
    load="$((2 + RANDOM % 3)).$((RANDOM % 10))"
    load_total="$(awk -v a="$load_total" -v b="$load" 'BEGIN { print a + b }')"
    sleep "$load"
    kill -0 "$bench" 2>/dev/null || { cat "$WORK/pgbench.$round.out"; fail "pgbench ended before the crash"; }
    if [ $((round % 2)) -eq 1 ]; then
        victim="postmaster"
        pm="$(head -1 "$data/postmaster.pid")"
        children="$(ps -o pid= --ppid "$pm" | tr '\n' ' ')"
        kill -9 "$pm"
        # The children notice their postmaster's death and exit; a new postmaster can only
        # start once none is attached to the old shared memory.
        wait_until 60 children_gone || fail "children of the killed postmaster still alive after 60 s"
        # (pg_ctl warns that the stale postmaster.pid may be a running server: it is not)
        cluster_start "$cluster" 2>"$WORK/pg_ctl.err" || { cat "$WORK/pg_ctl.err"; fail "restart after the crash"; }
    else
        # An inserting backend, caught mid-statement if possible (the clients are often
        # between transactions at the rate cap); any of pgbench's backends otherwise.
        for attempt in $(seq 1 20); do
            pid="$(psql_at "$port" "$db" -At -c "SELECT pid || ' (' || state || ')' FROM pg_stat_activity WHERE datname = '$db' AND backend_type = 'client backend'
                                         AND pid <> pg_backend_pid() AND (state <> 'idle' OR $attempt = 20)
                                         ORDER BY state = 'active' DESC, random() LIMIT 1")"
            [ -n "$pid" ] && break
            sleep 0.05
        done
        [ -n "$pid" ] || fail "no backend to kill"
        victim="backend $pid"
        kill -9 "${pid%% *}"
    fi
    # pgbench's clients lose their connections and it stops (non-zero, as expected).
    wait_until 30 bench_gone || stop_process "$bench"
    wait "$bench" || true
    bench=""
    wait_for_server "$port" "$db"

    acked="$(pgbench_transactions "$WORK/pgbench.$round.out")"
    [ -n "$acked" ] || { cat "$WORK/pgbench.$round.out"; fail "no pgbench summary"; }
    after="$(psql_at "$port" "$db" -At -c "SELECT count(*) FROM impressions")"
    added=$((after - before))
    lost=$((20 * acked > added ? 20 * acked - added : 0))
    total_acked=$((total_acked + 20 * acked))
    total_lost=$((total_lost + lost))

    # Every committed impression is reported seen.
    missed="$(psql_at "$port" "$db" -At -c "
        SELECT coalesce(sum(cardinality(seen_bloom.unseen('impressions', user_id, posts))), 0)
        FROM (SELECT user_id, array_agg(post_id) AS posts FROM impressions GROUP BY user_id) s")"
    # The filter answers as the one rebuilt from the impression rows.
    answers before_rebuild | psql_at "$port" "$db" -o /dev/null
    psql_at "$port" "$db" -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')"
    answers after_rebuild | psql_at "$port" "$db" -o /dev/null
    compare="$(psql_at "$port" "$db" -At <<'SQL'
SELECT (SELECT count(*) FROM before_rebuild b FULL JOIN after_rebuild a USING (user_id) WHERE a.unseen IS DISTINCT FROM b.unseen),
       (SELECT count(*) FROM before_rebuild_rows b FULL JOIN after_rebuild_rows a USING (user_key, generation, layer, segment)
        WHERE a.canonical IS NULL OR b.canonical IS NULL
           OR CASE WHEN layer < 0 THEN a.canonical <> b.canonical
                   ELSE (('x' || a.canonical)::varbit & ('x' || b.canonical)::varbit) <> ('x' || a.canonical)::varbit END),
       (SELECT count(*) FROM before_rebuild_rows b JOIN after_rebuild_rows a USING (user_key, generation, layer, segment)
        WHERE layer >= 0 AND a.canonical <> b.canonical),
       (SELECT count(*) FROM after_rebuild_rows),
       (SELECT count(*) FROM after_rebuild_rows WHERE layer >= 0),
       (SELECT count(*) FROM after_rebuild)
SQL
)"
    IFS='|' read -r answers_differ rows_differ rows_extra rows layer_rows users_seen <<<"$compare"
    echo "    round $round: killed $victim; pgbench acknowledged $acked batches ($((20 * acked)) impressions), $added rows committed, lost $lost;" \
        "not reported seen: $missed; after rebuild: $answers_differ of $users_seen users answer differently, $rows_differ of $rows filter rows differ" \
        "($rows_extra of $layer_rows layer rows held extra bits of lost transactions)"
    [ "$lost" -eq 0 ] || fail "round $round: acknowledged impressions lost"
    [ "$added" -gt 0 ] || fail "round $round: nothing committed before the crash"
    [ "$missed" -eq 0 ] || fail "round $round: committed impressions not reported seen"
    [ "$answers_differ" -eq 0 ] || fail "round $round: the filter answers differently from its rebuild"
    [ "$rows_differ" -eq 0 ] || fail "round $round: filter rows differ from their rebuild"
done

# The records of in-place writes (layer rows), then an immediate stop: crash recovery replays
# them under the consistency check too.
wal_records_report "$port" "$db" "INSERT INTO impressions (user_id, post_id) SELECT DISTINCT user_key, 1999999999 FROM impressions_seen WHERE layer >= 0" "$data"
run_pg "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null
cluster_start "$cluster"
total="$(psql_at "$port" "$db" -At -c "SELECT count(*) || ' impressions, ' || count(DISTINCT user_id) || ' users, up to ' || max(n) || ' per user' FROM (SELECT user_id, count(*) OVER (PARTITION BY user_id) AS n FROM impressions) s")"
layers="$(psql_at "$port" "$db" -At -c "SELECT count(*) FILTER (WHERE layer < 0) || ' exact rows, ' || count(*) FILTER (WHERE layer = 0) || ' first-layer rows, ' || count(*) FILTER (WHERE layer > 0) || ' rows of later layers' FROM impressions_seen")"
# Physical integrity: B-tree and heap checks, then every page's checksum after a clean stop.
psql_at "$port" "$db" -o /dev/null -c "SELECT bt_index_parent_check(c.oid, true) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                                WHERE i.indrelid IN ('impressions'::regclass, 'impressions_seen'::regclass)" ||
    fail "amcheck reported a problem"
checked="$(psql_at "$port" "$db" -At -c "SELECT count(*) FROM pg_index WHERE indrelid IN ('impressions'::regclass, 'impressions_seen'::regclass)")"
cluster_stop "$cluster"
run_pg "$PG_BIN/pg_checksums" --check -D "$data" >"$WORK/checksums.out" 2>&1 || { cat "$WORK/checksums.out"; fail "pg_checksums found bad pages"; }
bad_blocks="$(sed -n 's/^Bad checksums: *//p' "$WORK/checksums.out")"
scanned="$(sed -n 's/^Blocks scanned: *//p' "$WORK/checksums.out")"

recoveries="$(grep -c "database system was not properly shut down; automatic recovery in progress" "$log" || true)"
[ "$recoveries" -eq $((rounds + 1)) ] || fail "expected $((rounds + 1)) crash recoveries in the log, found $recoveries"
killed="$(grep -c "was terminated by signal 9" "$log" || true)"
markers='inconsistent page|PANIC:  |invalid page|corrupt|could not read block|checksum verification failed|unexpected zero page|missing chunk number|invalid memory alloc request|TRAP:|terminated by signal (6|11)|could not access status of transaction'
if grep -Ei "$markers" "$log" >"$WORK/markers"; then
    sed 's/^/    log: /' "$WORK/markers" | head -20
    fail "corruption markers in the server log"
fi
echo "    $rounds rounds ($(((rounds + 1) / 2)) postmaster kills, $((rounds / 2)) backend kills), $clients clients, 20-row batches over $users users (at most $rate batches/s), ${load_total}s of load before the kills"
echo "    committed: $total; acknowledged by pgbench: $total_acked; impressions lost: $total_lost"
echo "    filter: $layers; recoveries in the log: $recoveries (the last after an immediate stop), backends killed: $killed"
echo "    amcheck: $checked indexes with heap checks clean; pg_checksums: $scanned blocks, $bad_blocks bad; no corruption marker in the log"
echo "    ok"

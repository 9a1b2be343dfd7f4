#!/usr/bin/env bash
# test.sh: one major (Citus 13.2.2 builds for PostgreSQL 15 to 17; CI runs it on 15)
# seen_bloom on Citus (docs/SCALING.md): a loopback coordinator and two workers
# (../shared/vendor/citus-cluster.sh; CITUS_VENDOR names another directory), Citus built by
# build-citus.sh there when it is not installed; without either, or on a major Citus does not
# build for, the test skips (common.sh's skip: scripts/test.sh lists it, and CI fails on the
# missing vendor directory). Checks:
#   - track() refuses a table distributed by another column or not hash-distributed (0A000),
#     a distributed table with rows (55000), and a table tracked first and distributed later
#     fails its first insert with 55000;
#   - INSERT ... VALUES, INSERT ... SELECT, COPY and a co-located multi-shard INSERT ... SELECT
#     through the coordinator, and inserts from a client on each worker, are folded on the
#     workers: every committed impression in the window is seen, and the answers of
#     seen_bloom.unseen (fetched through the coordinator), of the delegated
#     <table>_unseen/<table>_has_seen (in and out of a transaction block) equal those of a
#     single-node tracked copy of the same rows on the coordinator;
#   - a failed distributed statement and a rolled-back transaction leave nothing folded;
#   - the empty relations of the distributed tables on the workers stay empty;
#   - expire, rebuild (one user; all users), stats and TRUNCATE agree with the single node;
#   - under 4 clients inserting: a shard move in each transfer mode and a shard split, then a
#     worker restart, a new worker and a rebalance onto it: no committed impression is missed;
#   - a renamed tracked column is followed on the workers; RENAME TO and SET SCHEMA of the
#     table are refused (0A000: the delegated functions are named after it);
#   - the distributed table is tracked in layout 2, and relayout, compact and set_user_cap
#     refuse it (0A000);
#   - untrack removes the filter table and the read functions, and the table can be tracked
#     again; DROP TABLE takes the tracking along;
#   - with seen_bloom preloaded on every node and its maintenance worker on (off before), a
#     distributed table of a '30 seconds' window and 3 generations loses its expired filter
#     rows in every shard with no maintenance call.
# Usage: citus.sh PG_BIN PORT (PORT unused: the test runs its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
vendor="${CITUS_VENDOR:-$ROOT/../shared/vendor}"
base=25710
w1_port=$((base + 1))
w2_port=$((base + 2))
w3_port=$((base + 3))

major="$("$PG_BIN/pg_config" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')"
case "$major" in 15 | 16 | 17) ;; *)
    skip "Citus 13.2.2 builds for PostgreSQL 15 to 17, not $major"
    ;;
esac
if [ ! -x "$vendor/citus-cluster.sh" ]; then
    skip "no $vendor/citus-cluster.sh (the Citus source and scripts; CITUS_VENDOR names their directory)"
fi
if [ ! -f "$("$PG_BIN/pg_config" --pkglibdir)/citus.so" ]; then
    step "Building Citus 13.2.2 for PostgreSQL $major (../shared/vendor/build-citus.sh, about 3 minutes)"
    "$vendor/build-citus.sh" "$PG_BIN/pg_config"
fi

dir="$(cluster_dir citus)"
cluster_prepare_dir "$dir"
on_exit "$vendor/citus-cluster.sh" destroy "$dir"
export RUST_BACKTRACE=1
# Debian's 15.20 lets logical decoding load only the output plugins listed here; Citus'
# shard splits decode through its own.
# seen_bloom preloaded on every node, its maintenance worker off until the last step (the
# steps before compare states that a worker's expire would change).
# shellcheck disable=SC2089 # the quotes are postgresql.conf's
CITUS_EXTRA_CONF="shared_preload_libraries = 'citus, seen_bloom'
seen_bloom.maintenance = off"
if grep -q '^output_plugin_libraries' <<<"$("$PG_BIN/postgres" --describe-config 2>/dev/null)"; then
    # shellcheck disable=SC2089 # as above
    CITUS_EXTRA_CONF+=$'\n'"output_plugin_libraries = 'pgoutput, test_decoding, citus'"
fi
# shellcheck disable=SC2090 # the quotes are postgresql.conf's
export CITUS_EXTRA_CONF
PG_BIN="$PG_BIN" "$vendor/citus-cluster.sh" start "$dir" "$base" >/dev/null
show_log_on_fail "$dir/coord.log" "$dir/w1.log" "$dir/w2.log"
co() { psql_at "$base" postgres "$@"; }
at() { local port="$1"; shift; psql_at "$port" postgres "$@"; }

# expect_error SQLSTATE PORT SQL: the statement fails with that SQLSTATE.
expect_error() {
    local state="$1" port="$2" statement="$3" out
    if out="$(psql_at "$port" postgres -v VERBOSITY=verbose -c "$statement" 2>&1)"; then
        fail "expected $state from: $statement"
    fi
    grep -q "ERROR:  $state:" <<<"$out" || fail "expected SQLSTATE $state from: $statement; got: $out"
}

co -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
SET citus.shard_count = 8;
CREATE TABLE impressions (id bigserial, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (user_id, id));
SELECT create_distributed_table('impressions', 'user_id');
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
-- The single-node copy: a plain tracked table on the coordinator, given the same rows.
CREATE TABLE single (id bigserial, user_id bigint NOT NULL, post_id bigint NOT NULL,
                     seen_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (user_id, id));
SELECT seen_bloom.track('single', 'user_id', 'post_id', 'seen_at');
SQL
note "tracked a table distributed by user over 8 shards, and a single-node copy"

step "Refusals"
co -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE TABLE by_item (user_id bigint, post_id bigint);
SELECT create_distributed_table('by_item', 'post_id');
CREATE TABLE reference_imp (user_id bigint, post_id bigint);
SELECT create_reference_table('reference_imp');
CREATE TABLE loaded (user_id bigint, post_id bigint);
SELECT create_distributed_table('loaded', 'user_id');
INSERT INTO loaded VALUES (1, 1);
CREATE TABLE late (user_id bigint, post_id bigint);
SELECT seen_bloom.track('late', 'user_id', 'post_id');
SQL
expect_error 0A000 "$base" "SELECT seen_bloom.track('by_item', 'user_id', 'post_id')"
expect_error 0A000 "$base" "SELECT seen_bloom.track('reference_imp', 'user_id', 'post_id')"
expect_error 55000 "$base" "SELECT seen_bloom.track('loaded', 'user_id', 'post_id')"
if co -c "SELECT create_distributed_table('late', 'user_id')" >/dev/null 2>&1; then
    fail "Citus distributed a table with seen_bloom's triggers without citus.enable_unsafe_triggers"
fi
co -o /dev/null -c "SET citus.enable_unsafe_triggers = on" -c "SELECT create_distributed_table('late', 'user_id')"
expect_error 55000 "$base" "INSERT INTO late VALUES (1, 1)"
note "by another column, reference table: 0A000; with rows: 55000; distributed after track: its inserts 55000"
# Layout 2 for distributed tables (shard moves do not carry layout 3's in-place writes); the
# single-node copy takes layout 3.
layouts="$(co -At -c "SELECT string_agg(impressions::text || '=' || layout, ',' ORDER BY impressions::text) FROM seen_bloom.tracked WHERE impressions::text IN ('impressions', 'single')")"
[ "$layouts" = "impressions=2,single=3" ] || fail "layouts of the distributed table and its single-node copy: $layouts"
expect_error 0A000 "$base" "CALL seen_bloom.relayout('impressions')"
expect_error 0A000 "$base" "CALL seen_bloom.compact('impressions')"
expect_error 0A000 "$base" "SELECT seen_bloom.set_user_cap('impressions', 500)"
cap="$(co -At -c "SELECT coalesce(user_cap::text, 'none') FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass")"
[ "$cap" = none ] || fail "the distributed table took a per-user cap: $cap"
note "layouts: $layouts; relayout, compact and set_user_cap of the distributed table: 0A000 (no cap set)"

# both SQL: runs SQL with TABLE as the distributed table, then as the single-node copy.
both() {
    co -c "${1//TABLE/impressions}" -c "${1//TABLE/single}" >/dev/null
}
candidates="ARRAY(SELECT g::bigint FROM generate_series(1, 3000) g)"
# Every user's answer over the same candidates; must match between the two tables.
answers() { # TABLE FUNCTION-FORM
    co -At -c "SELECT string_agg(u || ':' || seen_bloom.unseen('$1', u::bigint, $candidates)::text, ';' ORDER BY u)
               FROM generate_series(1, 230) u"
}
# Impressions well inside the window that a user's filter does not report seen.
missed() {
    co -At -c "SELECT count(*) FROM (SELECT user_id, array_agg(post_id) AS items FROM $1
                                     WHERE seen_at > now() - interval '29 days' GROUP BY user_id) s
               WHERE cardinality(seen_bloom.unseen('$1', s.user_id, s.items)) > 0"
}
check_equal() { # LABEL
    local n a b
    n="$(missed impressions)"
    [ "$n" = 0 ] || fail "$1: $n users have impressions their filter misses"
    a="$(answers impressions)"
    b="$(answers single)"
    [ "$a" = "$b" ] || fail "$1: seen_bloom.unseen over the distributed table differs from the single node"
    note "$1: every impression seen; 230 users' answers equal the single node's"
}

step "Inserts through the coordinator and from the workers"
both "INSERT INTO TABLE (user_id, post_id) VALUES (1, 1001), (1, 1002), (2, 2001), (3, 3001), (200, 1), (201, 2)"
both "INSERT INTO TABLE (user_id, post_id, seen_at)
      SELECT g % 200 + 1, g % 3000 + 1, now() - (g % 40) * interval '1 day' - interval '1 hour' FROM generate_series(1, 20000) g"
copy_rows="$(make_work_dir)/copy.csv"
for g in $(seq 1 500); do echo "$((g % 37 + 1)),$((g * 7 % 3000 + 1))"; done >"$copy_rows"
chmod a+r "$copy_rows" "$(dirname "$copy_rows")"
co -c "COPY impressions (user_id, post_id) FROM STDIN (FORMAT csv)" <"$copy_rows" >/dev/null
co -c "COPY single (user_id, post_id) FROM STDIN (FORMAT csv)" <"$copy_rows" >/dev/null
both "INSERT INTO TABLE (user_id, post_id) SELECT user_id, post_id + 1 FROM TABLE WHERE post_id % 50 = 0 AND seen_at > now() - interval '1 day'"
for port in "$w1_port" "$w2_port"; do
    at "$port" -c "INSERT INTO impressions (user_id, post_id) SELECT g % 30 + 201, $port + g FROM generate_series(1, 300) g" >/dev/null
    co -c "INSERT INTO single (user_id, post_id) SELECT g % 30 + 201, $port + g FROM generate_series(1, 300) g" >/dev/null
    n="$(at "$port" -At -c "SELECT count(*) FROM (SELECT user_id, array_agg(post_id) AS items FROM impressions
                                                   WHERE post_id > $port AND post_id <= $port + 300 GROUP BY user_id) s
                            WHERE cardinality(impressions_unseen(s.user_id, s.items)) > 0")"
    [ "$n" = 0 ] || fail "inserts from the worker on $port: $n users miss them (read on that worker)"
done
check_equal "VALUES, INSERT ... SELECT, COPY, multi-shard INSERT ... SELECT, inserts from both workers"

step "Atomicity"
existing="$(co -At -c "SELECT id FROM impressions WHERE user_id = 2 LIMIT 1")"
if co -c "INSERT INTO impressions (id, user_id, post_id) VALUES (nextval('impressions_id_seq'), 1, 888001), (nextval('impressions_id_seq'), 3, 888003), ($existing, 2, 888002)" >/dev/null 2>&1; then
    fail "a duplicate key across shards was accepted"
fi
co -o /dev/null -c "BEGIN" -c "INSERT INTO impressions (user_id, post_id) VALUES (1, 888011), (2, 888012), (3, 888013)" -c "ROLLBACK"
seen="$(co -At -c "SELECT count(*) FROM (VALUES (1, 888001), (3, 888003), (2, 888002), (1, 888011), (2, 888012), (3, 888013)) v(u, p)
                   WHERE seen_bloom.has_seen('impressions', v.u::bigint, v.p::bigint)")"
[ "$seen" = 0 ] || fail "a failed or rolled-back distributed insert left $seen items seen"
note "a failed multi-shard statement and a ROLLBACK leave nothing seen"

step "Reads: delegated, in a transaction block, through the coordinator, on the workers"
delegated="$(make_work_dir)/delegated.sql"
for u in $(seq 1 25) 201 230; do
    echo "SELECT impressions_unseen($u, ARRAY[1001, 1002, 2001, 5, 6, 7, 3001, 1500, 2999]::bigint[]);"
    echo "SELECT impressions_has_seen($u, 1001::bigint);"
done >"$delegated"
want="$(sed 's/impressions_unseen(\([0-9]*\),/seen_bloom.unseen('"'single'"', \1::bigint,/; s/impressions_has_seen(\([0-9]*\),/seen_bloom.has_seen('"'single'"', \1::bigint,/' "$delegated" | co -At)"
got="$(co -At <"$delegated")"
[ "$got" = "$want" ] || fail "delegated reads differ from the single node"
got="$( (echo "BEGIN;"; cat "$delegated"; echo "COMMIT;") | co -At | grep -v '^\(BEGIN\|COMMIT\)$')"
[ "$got" = "$want" ] || fail "delegated reads in a transaction block differ from the single node"
pushed="$(co -c "SET citus.log_remote_commands = on" -c "SELECT impressions_unseen(1, ARRAY[1001, 5]::bigint[])" 2>&1)"
grep -q "issuing SELECT public.impressions_unseen" <<<"$pushed" || fail "the read was not delegated: $pushed"
for port in "$w1_port" "$w2_port"; do
    got="$(sed 's/impressions_unseen(\([0-9]*\),/seen_bloom.unseen('"'impressions'"', \1::bigint,/; s/impressions_has_seen/impressions_has_seen/' "$delegated" | at "$port" -At)"
    [ "$got" = "$want" ] || fail "seen_bloom.unseen called on the worker on $port differs from the single node"
    shell="$(at "$port" -At -c "SELECT pg_catalog.pg_relation_size('impressions_seen'::regclass) + pg_catalog.pg_relation_size('impressions'::regclass)")"
    [ "$shell" = 0 ] || fail "the distributed tables' own relations on the worker on $port hold $shell bytes"
done
note "delegated calls (one round trip), in BEGIN ... COMMIT, and calls on each worker equal the single node"

step "Maintenance: stats, expire, rebuild, TRUNCATE"
a="$(co -At -c "SELECT users, generations FROM seen_bloom.stats('impressions')")"
b="$(co -At -c "SELECT users, generations FROM seen_bloom.stats('single')")"
[ "$a" = "$b" ] || fail "stats: $a against the single node's $b"
size="$(co -At -c "SELECT total_bytes > 0 FROM seen_bloom.stats('impressions')")"
[ "$size" = t ] || fail "stats: total_bytes of the distributed filter table is 0"
co -o /dev/null -c "SELECT seen_bloom.expire('impressions')" -c "SELECT seen_bloom.expire('single')"
both "DELETE FROM TABLE WHERE user_id = 7 AND post_id % 3 = 0"
co -o /dev/null -c "CALL seen_bloom.rebuild('impressions', 7::bigint)" -c "CALL seen_bloom.rebuild('single', 7::bigint)"
check_equal "after expire and rebuild of one user"
both "DELETE FROM TABLE WHERE post_id % 5 = 0"
co -o /dev/null -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')" -c "CALL seen_bloom.rebuild('impressions')" -c "CALL seen_bloom.rebuild('single')"
check_equal "after rebuild of all users (twice on Citus: idempotent)"

step "Shard moves (both modes) and a split under 4 clients inserting"
bench_script="$(make_work_dir)/insert.sql"
pgbench_insert_script 300 37 >"$bench_script"
chmod a+r "$bench_script" "$(dirname "$bench_script")"
pgbench_log="$(dirname "$bench_script")/pgbench.log"
client_at "$base" pgbench -n -c 4 -T 75 -f "$bench_script" postgres >"$pgbench_log" 2>&1 &
writers=$!
on_exit stop_process "$writers"
sleep 3
shard_on() { # PORT: an impressions shard placed on that worker
    co -At -c "SELECT s.shardid FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n ON n.groupid = p.groupid
               WHERE s.logicalrelid = 'impressions'::regclass AND n.nodeport = $1 ORDER BY s.shardid LIMIT 1"
}
node_id() { co -At -c "SELECT nodeid FROM pg_dist_node WHERE nodeport = $1"; }
shard="$(shard_on "$w1_port")"
co -o /dev/null -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $w1_port, '127.0.0.1', $w2_port, shard_transfer_mode := 'block_writes')"
note "moved shard $shard to the second worker (block_writes)"
shard="$(shard_on "$w2_port")"
co -o /dev/null -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $w2_port, '127.0.0.1', $w1_port, shard_transfer_mode := 'force_logical')"
note "moved shard $shard to the first worker (force_logical)"
shard="$(shard_on "$w1_port")"
split="$(co -At -c "SELECT ((shardminvalue::bigint + shardmaxvalue::bigint) / 2)::text FROM pg_dist_shard WHERE shardid = $shard")"
# block_writes: a non-blocking split of shards updated meanwhile (the filter rows are) stalls
# in Citus 13.2.2 (citusdata/citus#6790; here: "publisher did not send replica identity
# column expected by the logical replication target relation", retried for ever).
co -o /dev/null -c "SELECT citus_split_shard_by_split_points($shard, ARRAY['$split'], ARRAY[$(node_id "$w1_port"), $(node_id "$w2_port")], shard_transfer_mode := 'block_writes')"
note "split shard $shard at $split across both workers (block_writes)"
wait "$writers" || fail "the inserting clients failed: $(tail -5 "$pgbench_log")"
n="$(missed impressions)"
[ "$n" = 0 ] || fail "after the moves and the split: $n users have impressions their filter misses"
note "$(pgbench_transactions "$pgbench_log") batches of 20 committed during the moves and the split; every impression seen"

step "A worker restart, a new worker and a rebalance"
run_pg "$PG_BIN/pg_ctl" -D "$dir/w1" -m fast -w restart >/dev/null
wait_for_server "$w1_port" postgres
client_at "$base" pgbench -n -c 4 -t 50 -f "$bench_script" postgres >"$pgbench_log" 2>&1 || fail "inserts after the worker restart failed: $(tail -5 "$pgbench_log")"
w3_dir="$dir/w3"
cluster_new "$w3_dir" "$w3_port" "shared_preload_libraries = 'citus'" "wal_level = logical" "${CITUS_EXTRA_CONF:-}"
at "$w3_port" -qc "CREATE EXTENSION citus"
co -o /dev/null -c "SELECT citus_add_node('127.0.0.1', $w3_port)"
client_at "$base" pgbench -n -c 4 -T 40 -f "$bench_script" postgres >"$pgbench_log" 2>&1 &
writers=$!
on_exit stop_process "$writers"
co -o /dev/null -c "SELECT citus_rebalance_start(shard_transfer_mode := 'block_writes')" -c "SELECT citus_rebalance_wait()"
wait "$writers" || fail "the inserting clients failed during the rebalance: $(tail -5 "$pgbench_log")"
placed="$(co -At -c "SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid WHERE n.nodeport = $w3_port")"
[ "$placed" -gt 0 ] || fail "the rebalance placed no shard on the new worker"
client_at "$base" pgbench -n -c 4 -t 50 -f "$bench_script" postgres >"$pgbench_log" 2>&1 || fail "inserts after the rebalance failed: $(tail -5 "$pgbench_log")"
n="$(missed impressions)"
[ "$n" = 0 ] || fail "after the restart and the rebalance: $n users have impressions their filter misses"
co -o /dev/null -c "CALL citus_cleanup_orphaned_resources()"
n="$(missed impressions)"
[ "$n" = 0 ] || fail "after the cleanup of old placements: $n users have impressions their filter misses"
note "worker restarted; a third worker took $placed placements under 4 inserting clients; every impression seen"

step "A renamed tracked column"
co -o /dev/null -c "ALTER TABLE impressions RENAME COLUMN post_id TO item_id"
co -o /dev/null -c "INSERT INTO impressions (user_id, item_id) VALUES (1, 999001), (2, 999002), (3, 999003)"
n="$(co -At -c "SELECT count(*) FROM (VALUES (1, 999001), (2, 999002), (3, 999003)) v(u, p) WHERE impressions_has_seen(v.u::bigint, v.p::bigint)")"
[ "$n" = 3 ] || fail "after renaming the item column, $((3 - n)) of 3 new impressions are not seen"
co -o /dev/null -c "ALTER TABLE impressions RENAME COLUMN item_id TO post_id"
expect_error 0A000 "$base" "ALTER TABLE impressions RENAME TO impressions2"
co -o /dev/null -c "CREATE SCHEMA elsewhere"
expect_error 0A000 "$base" "ALTER TABLE impressions SET SCHEMA elsewhere"
note "a rename of the item column reaches the workers' configuration (the insert trigger is made anew); renaming the table is refused (0A000)"

step "TRUNCATE, untrack, track again"
co -o /dev/null -c "TRUNCATE impressions"
rows="$(co -At -c "SELECT count(*) FROM impressions_seen")"
[ "$rows" = 0 ] || fail "TRUNCATE left $rows filter rows"
co -o /dev/null -c "INSERT INTO impressions (user_id, post_id) VALUES (1, 42), (2, 43)"
[ "$(co -At -c "SELECT impressions_has_seen(1, 42::bigint)")" = t ] || fail "no fold after TRUNCATE"
co -o /dev/null -c "SELECT seen_bloom.untrack('impressions')"
left="$(co -At -c "SELECT count(*) FROM pg_proc WHERE proname IN ('impressions_unseen', 'impressions_has_seen')")/$(co -At -c "SELECT to_regclass('impressions_seen') IS NULL")"
[ "$left" = "0/t" ] || fail "untrack left read functions or the filter table ($left)"
co -o /dev/null -c "INSERT INTO impressions (user_id, post_id) VALUES (1, 44)" -c "TRUNCATE impressions"
co -o /dev/null -c "SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at')"
co -o /dev/null -c "INSERT INTO impressions (user_id, post_id) VALUES (5, 55)"
[ "$(co -At -c "SELECT impressions_has_seen(5, 55::bigint)")" = t ] || fail "no fold after tracking again"
co -o /dev/null -c "DROP TABLE impressions"
left="$(co -At -c "SELECT count(*) FROM pg_proc WHERE proname IN ('impressions_unseen', 'impressions_has_seen')")/$(co -At -c "SELECT to_regclass('impressions_seen') IS NULL")/$(co -At -c "SELECT count(*) FROM seen_bloom.tracked WHERE impressions::text NOT IN ('single', 'late')")"
[ "$left" = "0/t/0" ] || fail "DROP TABLE of a tracked distributed table left read functions, the filter table or its row ($left)"
note "TRUNCATE empties the filter shards; untrack drops what track made; tracking again works; DROP TABLE takes the tracking along"
step "Background maintenance of a distributed table"
for port in "$base" "$w1_port" "$w2_port" "$w3_port"; do
    at "$port" -c "ALTER SYSTEM SET seen_bloom.maintenance = on" -c "SELECT pg_reload_conf()" >/dev/null
done
co -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE TABLE expiring (user_id bigint NOT NULL, post_id bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT now());
SELECT create_distributed_table('expiring', 'user_id');
SELECT seen_bloom.track('expiring', 'user_id', 'post_id', 'seen_at', "window" => '30 seconds', generations => 3);
INSERT INTO expiring (user_id, post_id) SELECT u, k FROM generate_series(1, 100) u, generate_series(1, 5) k;
SQL
rows="$(co -At -c "SELECT count(*) FROM expiring_seen")"
[ "$rows" -gt 0 ] || fail "no filter rows in the shards of a tracked distributed table"
shards_empty() { [ "$(co -At -c "SELECT count(*) FROM expiring_seen")" = 0 ]; }
wait_until 120 shards_empty || fail "the shards' expired filter rows are still there after 120 s"
runs="$(co -At -c "SELECT runs || ' runs, ' || rows_expired || ' rows expired by the last' FROM seen_bloom.maintenance WHERE impressions = 'expiring'::regclass")"
errors="$(co -At -c "SELECT count(*) FROM seen_bloom.maintenance WHERE last_error_at >= last_run_started")"
[ "$errors" = 0 ] || { co -c "SELECT * FROM seen_bloom.maintenance"; fail "failed maintenance runs on the coordinator"; }
note "'30 seconds' window, 3 generations, no call: the $rows filter rows in the shards were expired by the coordinator's worker ($runs), none failed"
echo "PASS citus.sh"

#!/usr/bin/env bash
# test.sh: one major (a timed test with writers)
# CALL seen_bloom.relayout while 4 pgbench clients insert 20-row batches into a layout-2 table
# whose 60 users hold layer rows (300 items each, and at most 80 batches/s for 12 s add about
# 320 more: every user stays within the first layer, 720 items, where the rows do not depend
# on the order the items came in, so the filter must answer as its rebuild does):
#   - the move commits while the writers run, none of them fails;
#   - their sessions, which cached layout 2, switch to layout 3 at its commit: the filter
#     table's row versions (n_tup_upd) stop growing 3 s after it (statistics flush at most
#     once a second), while the writers keep folding;
#   - afterwards every committed impression is seen, the filter answers as its rebuild does
#     (seen_bloom.unseen over each user's items and 1,000 never-seen ids) and health() is empty.
# Then the same writers over a layout-1 table (as 0.1.0 and 0.2.0 tracked it) of 2,500 users of
# 100 items, whose rows are sized unlike layout 3's: relayout waits (with a NOTICE) for a
# repeatable-read snapshot left open 4 s, moves its users in 3 batches, committing each,
# while the writers run, and a second relayout of the table begun at the same time finishes
# too; afterwards the table is in layout 3 with no marker left and no row of layout 1's
# size, every committed impression is seen, and the filter answers as its rebuild does
# (every user stays under the 192 items of layout 3's exact row).
# Usage: relayout.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_relayout
seconds=12
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
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
-- A table of layout 2, as 0.3.0 tracked it (its rows are sized as layout 3's).
UPDATE seen_bloom.tracked SET layout = 2 WHERE impressions = 'impressions'::regclass;
SELECT seen_bloom._forget_config('impressions');
INSERT INTO impressions (user_id, post_id) SELECT u, 3000000000 + u * 1000 + k FROM generate_series(1, 60) u, generate_series(1, 300) k;
SQL
[ "$(q -c "SELECT count(*) FROM impressions_seen WHERE layer = 0")" -ge 60 ] || fail "the users have no layer rows"
updates() { q -c "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'impressions_seen'::regclass"; }

pgbench_insert_script 60 7 >"$WORK/insert.sql"
client_at "$PORT" pgbench -n -c 4 -j 2 -R 80 -T "$seconds" -f "$WORK/insert.sql" "$db" >"$WORK/pgbench.out" 2>&1 &
bench=$!
sleep 3
rows_before="$(q -c "SELECT count(*) FROM impressions")"
q -c "SET client_min_messages = warning" -c "CALL seen_bloom.relayout('impressions')" >/dev/null
moved_at="$(q -c "SELECT count(*) FROM impressions")"
sleep 3
updates_after_switch="$(updates)"
rows_after_switch="$(q -c "SELECT count(*) FROM impressions")"
wait "$bench" || { cat "$WORK/pgbench.out"; fail "a writer failed"; }
bench=""
sleep 1
updates_end="$(updates)"
rows_end="$(q -c "SELECT count(*) FROM impressions")"
layout="$(q -c "SELECT layout FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass")"
note "writers: $rows_before rows when relayout began, $moved_at when it committed, $rows_after_switch 3 s later, $rows_end at the end"
note "filter row versions written (n_tup_upd): $updates_after_switch 3 s after the move, $updates_end at the end; layout $layout"
[ "$layout" = 3 ] || fail "the table is in layout $layout after relayout"
[ "$updates_after_switch" -gt 0 ] || fail "layout 2 wrote no row versions before the move (the check would prove nothing)"
[ "$rows_end" -gt "$rows_after_switch" ] || fail "the writers folded nothing after the switch"
[ "$updates_end" = "$updates_after_switch" ] || fail "the writers still wrote row versions after the move ($updates_after_switch, then $updates_end)"

most="$(q -c "SELECT max(n) FROM (SELECT count(*) AS n FROM impressions GROUP BY user_id) s")"
[ "$most" -le 720 ] || fail "a user holds $most items: past the first layer the rebuild may place items otherwise"
missed="$(q -c "SELECT count(*) FROM impressions i WHERE NOT seen_bloom.has_seen('impressions', i.user_id, i.post_id)")"
note "after the move: $rows_end impressions (at most $most per user), $missed not seen"
[ "$missed" = 0 ] || fail "$missed committed impressions are not seen after relayout"
answers="SELECT md5(string_agg(user_id || ':' || seen_bloom.unseen('impressions', user_id,
                    array_agg || ARRAY(SELECT (2000000000 + g)::bigint FROM generate_series(1, 1000) g))::text, ';' ORDER BY user_id))
         FROM (SELECT user_id, array_agg(post_id ORDER BY post_id) FROM impressions GROUP BY user_id) s"
before="$(q -c "$answers")"
q -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')" >/dev/null
[ "$(q -c "$answers")" = "$before" ] || fail "the filter answers differently from its rebuild after relayout"
[ "$(q -c "SELECT count(*) FROM seen_bloom.health()")" = 0 ] || fail "health() after relayout: $(q -c "SELECT * FROM seen_bloom.health()")"

# --- layout 1 ---------------------------------------------------------------------------------
db=seen_bloom_relayout1
recreate_database "$PORT" "$db"
q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
-- A table of layout 1, as 0.1.0 and 0.2.0 tracked it.
UPDATE seen_bloom.tracked SET layout = 1 WHERE impressions = 'impressions'::regclass;
SELECT seen_bloom._forget_config('impressions');
INSERT INTO impressions (user_id, post_id) SELECT u, 3000000000 + u * 1000 + k FROM generate_series(1, 2500) u, generate_series(1, 100) k;
SQL
layout_1_rows="$(q -c "SELECT count(*) FROM impressions_seen WHERE layer = 0 AND length(bits) = 320")"
[ "$layout_1_rows" = 2500 ] || fail "the layout-1 users have $layout_1_rows rows of layout 1's first layer, expected 2500"
pgbench_insert_script 2500 7 >"$WORK/insert1.sql"
client_at "$PORT" pgbench -n -c 4 -j 2 -R 80 -T "$seconds" -f "$WORK/insert1.sql" "$db" >"$WORK/pgbench1.out" 2>&1 &
bench=$!
sleep 3
rows_before="$(q -c "SELECT count(*) FROM impressions")"
# A repeatable-read transaction whose snapshot predates the move, open for 4 s: the move
# waits for it before it changes the layout (it would read layout-1 rows as layout 3's).
q -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM impressions_seen" -c "SELECT pg_sleep(4)" -c "COMMIT" >/dev/null &
reader=$!
sleep 0.5
started=$SECONDS
# A second move of the same table, begun while the first waits: both finish (neither waits
# for the other's snapshot, and neither loops once the other has set layout 3).
timeout 300 "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -X -q -At -d "$db" \
    -c "CALL seen_bloom.relayout('impressions')" >"$WORK/relayout1b.out" 2>&1 &
second=$!
timeout 300 "$PG_BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -X -q -At -d "$db" \
    -c "CALL seen_bloom.relayout('impressions')" >"$WORK/relayout1.out" 2>&1 || { cat "$WORK/relayout1.out"; fail "relayout of the layout-1 table failed"; }
took=$((SECONDS - started))
wait "$second" || { cat "$WORK/relayout1b.out"; fail "a second relayout of the table, run at the same time, failed"; }
note "two relayouts at once: the first printed $(grep -c "/ 2500 users" "$WORK/relayout1.out" || true) batches, the second $(grep -c "/ 2500 users" "$WORK/relayout1b.out" || true); the second's last words: $(tail -n 1 "$WORK/relayout1b.out")"
wait "$reader" || fail "the repeatable-read reader failed"
moved_at="$(q -c "SELECT count(*) FROM impressions")"
wait "$bench" || { cat "$WORK/pgbench1.out"; fail "a writer failed"; }
bench=""
rows_end="$(q -c "SELECT count(*) FROM impressions")"
batches="$(cat "$WORK/relayout1.out" "$WORK/relayout1b.out" | grep -c "/ 2500 users" || true)"
IFS='|' read -r layout markers layout_1_rows <<<"$(q -c "SELECT (SELECT layout FROM seen_bloom.tracked),
    count(*) FILTER (WHERE layer = -3), count(*) FILTER (WHERE layer >= 0 AND length(bits) <> 1536) FROM impressions_seen")"
missed="$(q -c "SELECT count(*) FROM impressions i WHERE NOT seen_bloom.has_seen('impressions', i.user_id, i.post_id)")"
most="$(q -c "SELECT max(n) FROM (SELECT count(*) AS n FROM impressions GROUP BY user_id) s")"
note "layout 1: writers $rows_before rows when relayout began, $moved_at when it ended ($took s, waiting for a 4-s snapshot), $rows_end at the end; $batches batches of users"
note "layout 1: now layout $layout, $markers markers and $layout_1_rows rows of another size left, $missed of $rows_end impressions not seen (at most $most per user)"
grep -q "waiting for .* transactions that hold a snapshot" "$WORK/relayout1.out" || fail "relayout did not wait for the open snapshot: $(cat "$WORK/relayout1.out")"
[ "$took" -ge 3 ] || fail "relayout took $took s, less than the open snapshot it had to wait for"
[ "$batches" -ge 3 ] || fail "relayout moved the users in $batches batches: $(cat "$WORK/relayout1.out")"
[ "$moved_at" -gt "$rows_before" ] || fail "the writers added nothing while relayout ran"
[ "$rows_end" -gt "$moved_at" ] || fail "the writers added nothing after relayout"
[ "$layout" = 3 ] || fail "the table is in layout $layout after relayout"
[ "$markers" = 0 ] || fail "$markers marker rows are left after relayout"
[ "$layout_1_rows" = 0 ] || fail "$layout_1_rows layer rows are not of layout 3's size after relayout"
[ "$missed" = 0 ] || fail "$missed committed impressions are not seen after relayout from layout 1"
[ "$most" -le 192 ] || fail "a user holds $most items: past the exact row the rebuild may place items otherwise"
before="$(q -c "$answers")"
q -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')" >/dev/null
[ "$(q -c "$answers")" = "$before" ] || fail "the filter answers differently from its rebuild after relayout from layout 1"
[ "$(q -c "SELECT count(*) FROM seen_bloom.health()")" = 0 ] || fail "health() after relayout from layout 1: $(q -c "SELECT * FROM seen_bloom.health()")"
echo "OK: relayout under 4 writers: from layout 2 at once and from layout 1 in batches of users; every committed impression seen, answers equal a rebuild's"

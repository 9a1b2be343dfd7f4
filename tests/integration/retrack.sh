#!/usr/bin/env bash
# test.sh: one major (a timed test with writers)
# CALL seen_bloom.retrack (window 30 days to 10, 5 generations to 10) on a table of 2,500
# users of 40 items spread over 20 days, while 4 pgbench clients insert 20-row batches and a
# checker asks has_seen for 200 committed in-window impressions every 0.3 s:
#   - the move commits batches of 1,000 users while the writers run, and none of them fails;
#   - the checker never finds a committed impression unseen, before, during or after the swap;
#   - afterwards the settings are the new ones, the filter table keeps its name, the move's
#     table, triggers and row are gone, every committed impression of the last 10 days is seen,
#     those 11 to 20 days old are not (under 5% of them seen: the false positives), and the
#     filter answers as its rebuild does; health() is empty.
# Then a move whose swap a reader of the filter table holds off: the swap waits a second at a
# time (inserts go through in between) until statement_timeout stops it; the move's table
# keeps folding new impressions, health() names it, and the next retrack (with a capacity)
# starts it again and finishes.
# Usage: retrack.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_retrack
seconds=14
make_work_dir
bench=""
checker=""
stop_workers() { stop_process "$bench"; stop_process "$checker"; }
on_exit stop_workers
recreate_database "$PORT" "$db"
q() { psql_at "$PORT" "$db" -At "$@"; }
q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON impressions (user_id);
INSERT INTO impressions (user_id, post_id, seen_at)
SELECT u, 3000000000 + u * 1000 + k, now() - (k % 20) * interval '1 day' - interval '1 hour'
FROM generate_series(1, 2500) u, generate_series(1, 40) k;
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
SQL
filter_oid="$(q -c "SELECT 'impressions_seen'::regclass::oid")"

# The checker: 200 committed impressions of the last 9 days at random, each must read seen.
checker_sql="SELECT count(*) FILTER (WHERE NOT seen_bloom.has_seen('impressions', s.user_id, s.post_id)) || ' ' || count(*)
             FROM (SELECT user_id, post_id FROM impressions WHERE seen_at > now() - interval '9 days'
                   ORDER BY random() LIMIT 200) s"
check_loop() {
    local end=$((SECONDS + seconds))
    while [ "$SECONDS" -lt "$end" ]; do
        q -c "$checker_sql" >>"$WORK/checks.out" 2>&1 || echo "error" >>"$WORK/checks.out"
        sleep 0.3
    done
}
pgbench_insert_script 2500 7 >"$WORK/insert.sql"
client_at "$PORT" pgbench -n -c 4 -j 2 -R 80 -T "$seconds" -f "$WORK/insert.sql" "$db" >"$WORK/pgbench.out" 2>&1 &
bench=$!
check_loop &
checker=$!
sleep 3
rows_before="$(q -c "SELECT count(*) FROM impressions")"
q -c "CALL seen_bloom.retrack('impressions', \"window\" => '10 days', generations => 10)" >"$WORK/retrack.out" 2>&1 ||
    { cat "$WORK/retrack.out"; fail "retrack failed under writers"; }
moved_at="$(q -c "SELECT count(*) FROM impressions")"
wait "$checker" || fail "the checker failed"
checker=""
wait "$bench" || { cat "$WORK/pgbench.out"; fail "a writer failed"; }
bench=""
rows_end="$(q -c "SELECT count(*) FROM impressions")"
batches="$(grep -c "/ 2500 users" "$WORK/retrack.out" || true)"
checks="$(wc -l <"$WORK/checks.out")"
check_misses="$(awk '$1 != 0 || NF != 2 {n++} END {print n + 0}' "$WORK/checks.out")"
note "writers: $rows_before rows when retrack began, $moved_at when it committed, $rows_end at the end; $batches batches of users"
note "checker: $checks checks of 200 committed impressions while it ran, $check_misses with an impression unseen or an error"
[ "$batches" -ge 3 ] || fail "retrack moved the users in $batches batches: $(cat "$WORK/retrack.out")"
[ "$moved_at" -gt "$rows_before" ] || fail "the writers added nothing while retrack ran"
[ "$rows_end" -gt "$moved_at" ] || fail "the writers added nothing after retrack"
[ "$checks" -ge 10 ] || fail "the checker ran only $checks times"
[ "$check_misses" = 0 ] || fail "a committed impression read unseen (or a check failed) while retrack ran: $(grep -v '^0 ' "$WORK/checks.out" | head -3)"

IFS='|' read -r window generations name new_oid <<<"$(q -c "SELECT \"window\", generations, filter_table, filter_table::oid FROM seen_bloom.tracked")"
leftovers="$(q -c "SELECT (SELECT count(*) FROM seen_bloom.retracking) || ' rows, '
    || (SELECT count(*) FROM pg_class WHERE relname LIKE 'impressions_seen_next%') || ' relations, '
    || (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'seen_bloom_next_%') || ' triggers, '
    || (SELECT count(*) FROM pg_proc WHERE proname LIKE 'impressions_seen_next%') || ' functions'")"
note "after: window $window, $generations generations, filter table $name (OID $filter_oid before, $new_oid now); left of the move: $leftovers"
{ [ "$window" = "10 days" ] && [ "$generations" = 10 ]; } || fail "the settings after retrack are $window, $generations"
{ [ "$name" = impressions_seen ] && [ "$new_oid" != "$filter_oid" ]; } || fail "the filter table after retrack is $name ($new_oid)"
[ "$leftovers" = "0 rows, 0 relations, 0 triggers, 0 functions" ] || fail "retrack left $leftovers"
IFS='|' read -r recent missed old old_seen <<<"$(q -c "SELECT count(*) FILTER (WHERE seen_at > now() - interval '10 days'),
    count(*) FILTER (WHERE seen_at > now() - interval '10 days' AND NOT seen_bloom.has_seen('impressions', user_id, post_id)),
    count(*) FILTER (WHERE seen_at < now() - interval '11 days'),
    count(*) FILTER (WHERE seen_at < now() - interval '11 days' AND seen_bloom.has_seen('impressions', user_id, post_id))
    FROM impressions")"
note "after: $missed of $recent impressions of the last 10 days not seen; $old_seen of $old older than 11 days seen"
[ "$missed" = 0 ] || fail "$missed committed impressions of the new window are not seen after retrack"
{ [ "$old" -gt 0 ] && [ "$((old_seen * 20))" -lt "$old" ]; } || fail "$old_seen of $old impressions outside the new window read seen"
answers="SELECT md5(string_agg(user_id || ':' || seen_bloom.unseen('impressions', user_id,
                    array_agg || ARRAY(SELECT (2000000000 + g)::bigint FROM generate_series(1, 1000) g))::text, ';' ORDER BY user_id))
         FROM (SELECT user_id, array_agg(post_id ORDER BY post_id) FROM impressions GROUP BY user_id) s"
before="$(q -c "$answers")"
q -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')" >/dev/null
[ "$(q -c "$answers")" = "$before" ] || fail "the filter answers differently from its rebuild after retrack"
[ "$(q -c "SELECT count(*) FROM seen_bloom.health()")" = 0 ] || fail "health() after retrack: $(q -c "SELECT * FROM seen_bloom.health()")"

# --- a move that stopped ------------------------------------------------------------------------
# A reader of the filter table, open for 5 s, holds the swap off (DROP TABLE waits for it):
# the swap tries for a second at a time, letting inserts through between tries, until the
# statement timeout stops the move.
q -c "BEGIN" -c "SELECT count(*) FROM impressions_seen" -c "SELECT pg_sleep(5)" -c "COMMIT" >/dev/null &
reader=$!
sleep 0.5
q -c "SET statement_timeout = '3s'" -c "CALL seen_bloom.retrack('impressions', generations => 4)" >"$WORK/stopped.out" 2>&1 &
mover=$!
sleep 1.5
# An insert while the swap waits goes through between its tries.
q -c "SET lock_timeout = '2500ms'" -c "INSERT INTO impressions (user_id, post_id) VALUES (3, 79)" >/dev/null ||
    fail "an insert waited over 2.5 s for the swap"
if wait "$mover"; then
    fail "retrack finished while a reader held the filter table"
fi
wait "$reader" || fail "the reader failed"
grep -q "statement timeout" "$WORK/stopped.out" || fail "the stopped retrack failed otherwise: $(cat "$WORK/stopped.out")"
tries="$(grep -c "the swap waited 1 s for a lock" "$WORK/stopped.out" || true)"
note "a reader held the swap off: it tried $tries times before the statement timeout"
[ "$tries" -ge 1 ] || fail "the swap did not wait a second at a time: $(cat "$WORK/stopped.out")"
[ "$(q -c "SELECT count(*) FROM seen_bloom.retracking")" = 1 ] || fail "the stopped move left no row in seen_bloom.retracking"
q -c "INSERT INTO impressions (user_id, post_id) VALUES (1, 77), (2, 78)" >/dev/null
next_rows="$(q -c "SELECT count(*) FROM impressions_seen_next WHERE user_key IN (1, 2, 3)")"
[ "$next_rows" -gt 0 ] || fail "the stopped move's table did not fold new impressions"
health="$(q -c "SELECT problem FROM seen_bloom.health()")"
note "a stopped move: health() says: $health"
case "$health" in *retrack*) ;; *) fail "health() does not name the stopped retrack: $health" ;; esac
q -c "CALL seen_bloom.retrack('impressions', generations => 4, capacity => 100)" >"$WORK/again.out" 2>&1 ||
    { cat "$WORK/again.out"; fail "retrack after a stopped one failed"; }
IFS='|' read -r generations layout <<<"$(q -c "SELECT generations, layout FROM seen_bloom.tracked")"
missed="$(q -c "SELECT count(*) FROM impressions WHERE seen_at > now() - interval '10 days' AND NOT seen_bloom.has_seen('impressions', user_id, post_id)")"
note "retrack again: $generations generations, layout $layout, $missed impressions of the window not seen"
{ [ "$generations" = 4 ] && [ "$layout" = 1025 ]; } || fail "after the second retrack: $generations generations, layout $layout"
[ "$missed" = 0 ] || fail "$missed impressions not seen after the second retrack"
[ "$(q -c "SELECT count(*) FROM seen_bloom.retracking")" = 0 ] || fail "the second retrack left its row"
echo "OK: retrack under 4 writers in batches of users, no impression unseen at any check; a stopped move is named by health() and started again"

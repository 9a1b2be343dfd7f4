#!/usr/bin/env bash
# test.sh: one major (a replication test with two clusters; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# Logical replication: a publisher (127.0.0.1:25466, wal_level = logical) and a subscriber
# (127.0.0.1:25467), each its own cluster, both tracking their copy of two impressions tables
# (bigint users; text users with a `where` predicate). The publication carries the
# impressions tables only. Checks:
#   - the initial table sync folds the rows already there (the subscriber's replica-enabled
#     row trigger fires for the sync's COPY);
#   - streamed INSERTs (multi-row and COPY) and UPDATEs are folded: every impression in the
#     window is seen on the subscriber, and seen_bloom.unseen over a candidate set answers
#     exactly as on the publisher, for every user;
#   - inserts made on the subscriber itself are folded once (statement trigger, origin role);
#   - seen_bloom.health() reports nothing on either side;
#   - users heavy enough for layer rows (layout 3 writes those in place at commit, which
#     logical decoding does not see) are folded by the subscriber's own trigger;
#   - FOR ALL TABLES: a subscriber database made from the publisher's `pg_dump --schema-only`
#     (no track() of its own) subscribed to a publication of all tables receives the
#     impressions, the filter rows and seen_bloom.tracked (regclass values travel as names);
#     its replica trigger sees the filter table subscribed and leaves the row versions to the
#     publisher, making only layout 3's in-place writes itself, so no row conflicts, and its
#     answers equal the publisher's after more inserts;
#   - then the publisher's table goes to layout 1 and relayout moves it back to 3 while a
#     writer runs: the subscriber's replicated seen_bloom.tracked row follows, its trigger
#     functions are remade with it, and it misses nothing and answers as the publisher.
# Usage: logical_replication.sh PG_BIN PORT (PORT unused: the test runs its own clusters)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
pub_port=25466
sub_port=25467
db=seen_bloom_logical
pub_dir="$(cluster_dir logical-publisher)"
sub_dir="$(cluster_dir logical-subscriber)"
pub() { psql_at "$pub_port" "$db" "$@"; }
sub() { psql_at "$sub_port" "$db" "$@"; }

schema="
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint, post_id bigint,
                          seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
CREATE TABLE text_impressions (id bigserial PRIMARY KEY, who text, what text, pct real);
SELECT seen_bloom.track('text_impressions', 'who', 'what', \"where\" => 'pct >= 0.5');
"
# The same candidates on both sides: every user's answer over ids 1..300 and items 0..99.
answers="
SELECT string_agg(u || ':' || seen_bloom.unseen('impressions', u::bigint, ARRAY(SELECT generate_series(1, 300)::bigint))::text, ';' ORDER BY u)
FROM generate_series(1, 60) u;
SELECT string_agg(u || ':' || seen_bloom.unseen('text_impressions', 'user-' || u, ARRAY(SELECT 'item-' || g FROM generate_series(0, 99) g))::text, ';' ORDER BY u)
FROM generate_series(1, 30) u;
SELECT string_agg(u || ':' || cardinality(seen_bloom.unseen('impressions', u::bigint, ARRAY(SELECT generate_series(1000, 3200)::bigint))), ';' ORDER BY u)
FROM generate_series(1, 3) u;
SELECT cardinality(seen_bloom.unseen('text_impressions', 'heavy', ARRAY(SELECT 'h-' || g FROM generate_series(0, 999) g)));
"
# Impressions in the window that the subscriber's filter misses (must be 0).
missed="
SELECT (SELECT count(*) FROM impressions i WHERE NOT seen_bloom.has_seen('impressions', i.user_id, i.post_id))
     + (SELECT count(*) FROM text_impressions i WHERE i.pct >= 0.5 AND NOT seen_bloom.has_seen('text_impressions', i.who, i.what));
"

cluster_new "$pub_dir" "$pub_port" "wal_level = logical" "max_wal_senders = 8" "max_replication_slots = 8"
psql_at "$pub_port" postgres -c "CREATE DATABASE $db"
pub -o /dev/null -c "$schema"
pub -o /dev/null <<'SQL'
INSERT INTO impressions (user_id, post_id) SELECT u, (u * 7 + k) % 300 + 1 FROM generate_series(1, 40) u, generate_series(1, 20) k;
INSERT INTO text_impressions (who, what, pct) SELECT 'user-' || u, 'item-' || (u * 3 + k) % 100, (k % 3) / 2.0
FROM generate_series(1, 20) u, generate_series(1, 10) k;
-- Heavy users: more items in a generation than an exact row holds, so layer rows.
INSERT INTO impressions (user_id, post_id) SELECT u, 1000 + k FROM generate_series(1, 3) u, generate_series(1, 400) k;
INSERT INTO text_impressions (who, what, pct) SELECT 'heavy', 'h-' || k, 1.0 FROM generate_series(1, 300) k;
CREATE PUBLICATION seen_pub FOR TABLE impressions, text_impressions;
SQL

# The subscriber: a cluster of its own.
cluster_new "$sub_dir" "$sub_port" "wal_level = logical"
psql_at "$sub_port" postgres -c "CREATE DATABASE $db"
sub -o /dev/null -c "$schema"
sub -o /dev/null -c "CREATE SUBSCRIPTION seen_sub CONNECTION 'host=127.0.0.1 port=$pub_port user=postgres dbname=$db' PUBLICATION seen_pub"

# Rows of both tables (impressions/text_impressions), as the subscriber must reach them.
counts="SELECT (SELECT count(*) FROM impressions) || '/' || (SELECT count(*) FROM text_impressions)"
wait_for_subscription "$pub_port" "$db" "$sub_port" "$db" "$counts"
n="$(sub -At -c "$missed")"
note "initial sync: $(sub -At -c "SELECT count(*) FROM impressions") + $(sub -At -c "SELECT count(*) FROM text_impressions") rows copied, $n impressions missed by the subscriber's filters"
[ "$n" = 0 ] || fail "the initial sync left $n impressions unfolded on the subscriber"

# Streamed changes: multi-row inserts, COPY, an UPDATE that changes items, new users.
pub -o /dev/null <<'SQL'
INSERT INTO impressions (user_id, post_id) SELECT u, (u * 11 + k) % 300 + 1 FROM generate_series(20, 60) u, generate_series(1, 15) k;
COPY impressions (user_id, post_id) FROM STDIN;
5	299
6	298
\.
UPDATE impressions SET post_id = 300 WHERE user_id = 7 AND id = (SELECT min(id) FROM impressions WHERE user_id = 7);
INSERT INTO text_impressions (who, what, pct) SELECT 'user-' || u, 'item-' || (u * 5 + k) % 100, 1.0
FROM generate_series(10, 30) u, generate_series(1, 5) k;
INSERT INTO impressions (user_id, post_id) SELECT u, 2000 + k FROM generate_series(1, 3) u, generate_series(1, 30) k;
INSERT INTO text_impressions (who, what, pct) SELECT 'heavy', 'h-' || (300 + k), 1.0 FROM generate_series(1, 30) k;
SQL
layer_rows="$(pub -At -c "SELECT count(*) FROM impressions_seen WHERE layer >= 0")"
[ "$layer_rows" -gt 0 ] || fail "the heavy users have no layer rows on the publisher"
[ "$(pub -At -c "SELECT layout FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass")" = 3 ] ||
    fail "impressions is not in layout 3"
wait_for_subscription "$pub_port" "$db" "$sub_port" "$db" "$counts"
n="$(sub -At -c "$missed")"
note "streamed: $n impressions missed by the subscriber's filters"
[ "$n" = 0 ] || fail "streamed changes left $n impressions unfolded on the subscriber"
[ "$(sub -At -c "SELECT seen_bloom.has_seen('impressions', 7::bigint, 300)")" = t ] || fail "the streamed UPDATE's new item is not seen"
pub_answers="$(pub -At -c "$answers")"
sub_answers="$(sub -At -c "$answers")"
[ "$pub_answers" = "$sub_answers" ] || fail "the subscriber's answers differ from the publisher's"
note "answers of 90 users over their candidates: identical on both sides ($(printf '%s' "$pub_answers" | wc -c) bytes)"

# A local insert on the subscriber is folded by the statement trigger alone.
sub -o /dev/null -c "INSERT INTO impressions (id, user_id, post_id) VALUES (1000000, 999, 1)"
[ "$(sub -At -c "SELECT seen_bloom.has_seen('impressions', 999::bigint, 1)")" = t ] || fail "a local insert on the subscriber is not seen"
for side in pub sub; do
    problems="$("$side" -At -c "SELECT count(*) FROM seen_bloom.health()")"
    [ "$problems" = 0 ] || fail "seen_bloom.health() on the $side side: $("$side" -At -c "SELECT * FROM seen_bloom.health()")"
done
sub -o /dev/null -c "DROP SUBSCRIPTION seen_sub"

# FOR ALL TABLES: the filter tables and seen_bloom.tracked travel too.
all_db="${db}_all"
pub -o /dev/null -c "CREATE PUBLICATION all_pub FOR ALL TABLES"
psql_at "$sub_port" postgres -c "CREATE DATABASE $all_db"
client_at "$pub_port" pg_dump --schema-only "$db" |
    psql_at "$sub_port" "$all_db" -o /dev/null 2>&1 |
    grep -v "^SET\|^$" || true
sub_all() { psql_at "$sub_port" "$all_db" "$@"; }
sub_all -o /dev/null -c "CREATE SUBSCRIPTION all_sub CONNECTION 'host=127.0.0.1 port=$pub_port user=postgres dbname=$db' PUBLICATION all_pub"
# What the FOR ALL TABLES subscriber must reach: impressions/text/filter rows/text filter rows/tracked.
state="SELECT (SELECT count(*) FROM impressions) || '/' || (SELECT count(*) FROM text_impressions) || '/' ||
                (SELECT count(*) FROM impressions_seen) || '/' || (SELECT count(*) FROM text_impressions_seen) || '/' ||
                (SELECT count(*) FROM seen_bloom.tracked)"
wait_for_subscription "$pub_port" "$db" "$sub_port" "$all_db" "$state"
pub -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT u, (u * 13 + k) % 300 + 1 FROM generate_series(1, 60) u, generate_series(1, 5) k"
# Written in place on the publisher: the subscriber must write them itself.
pub -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT u, 3000 + k FROM generate_series(1, 3) u, generate_series(1, 40) k"
pub -o /dev/null -c "INSERT INTO text_impressions (who, what, pct) SELECT 'heavy', 'h-' || (400 + k), 1.0 FROM generate_series(1, 40) k"
wait_for_subscription "$pub_port" "$db" "$sub_port" "$all_db" "$state"
# The FOR ALL TABLES subscriber (caught up) misses nothing, answers as the publisher, has no
# health() problem and met no conflict; WHEN says at which point of the test.
all_subscriber_agrees() { # WHEN
    local n
    n="$(sub_all -At -c "$missed")"
    [ "$n" = 0 ] || fail "the FOR ALL TABLES subscriber misses $n impressions $1"
    [ "$(pub -At -c "$answers")" = "$(sub_all -At -c "$answers")" ] || fail "the FOR ALL TABLES subscriber's answers differ from the publisher's $1"
    [ "$(sub_all -At -c "SELECT count(*) FROM seen_bloom.health()")" = 0 ] || fail "health() on the FOR ALL TABLES subscriber $1: $(sub_all -At -c "SELECT * FROM seen_bloom.health()")"
    if grep -q "duplicate key\|conflict" "$sub_dir/server.log"; then
        grep "duplicate key\|conflict" "$sub_dir/server.log" | head -5
        fail "the FOR ALL TABLES subscription met conflicts $1"
    fi
}
all_subscriber_agrees "after more inserts"
note "FOR ALL TABLES: $(sub_all -At -c "$state") rows (impressions/text/filter rows/text filter rows/tracked), answers identical, no conflicts"

# A move from layout 1 on the publisher, with a writer running through it: the subscriber's
# row of seen_bloom.tracked follows (1, 13, 3) and its trigger functions are remade at the
# same point of the stream, so it reads each user in its layout and, once users move, makes
# their in-place writes itself. First the table goes back to layout 1 (its rows rebuilt so).
layout_of="SELECT layout FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass"
pub -o /dev/null -c "SET client_min_messages = warning" \
    -c "UPDATE seen_bloom.tracked SET layout = 1 WHERE impressions = 'impressions'::regclass" \
    -c "CALL seen_bloom.rebuild('impressions')"
wait_for_subscription "$pub_port" "$db" "$sub_port" "$all_db" "$state"
[ "$(sub_all -At -c "$layout_of")" = 1 ] || fail "the FOR ALL TABLES subscriber's layout is $(sub_all -At -c "$layout_of"), not the publisher's 1"
[ "$(sub_all -At -c "$missed")" = 0 ] || fail "the FOR ALL TABLES subscriber misses impressions after the publisher went to layout 1"
make_work_dir
pgbench_insert_script 60 7 >"$WORK/insert.sql"
client_at "$pub_port" pgbench -n -c 2 -j 2 -R 40 -T 6 -f "$WORK/insert.sql" "$db" >"$WORK/pgbench.out" 2>&1 &
writer=$!
on_exit stop_process "$writer"
sleep 1
pub -o /dev/null -c "SET client_min_messages = warning" -c "CALL seen_bloom.relayout('impressions')"
wait "$writer" || { cat "$WORK/pgbench.out"; fail "a writer on the publisher failed during relayout"; }
# Heavy users after the move: new layer rows (row versions), then items written in place.
pub -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT u, 5000 + k FROM generate_series(1, 3) u, generate_series(1, 300) k"
pub -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT u, 6000 + k FROM generate_series(1, 3) u, generate_series(1, 40) k"
wait_for_subscription "$pub_port" "$db" "$sub_port" "$all_db" "$state"
IFS='|' read -r sub_layout sub_markers <<<"$(sub_all -At -c "SELECT ($layout_of), (SELECT count(*) FROM impressions_seen WHERE layer = -3)")"
n="$(sub_all -At -c "$missed")"
note "FOR ALL TABLES, after the publisher's move from layout 1: subscriber in layout $sub_layout, $sub_markers markers, $n of $(sub_all -At -c "SELECT count(*) FROM impressions") impressions missed"
[ "$sub_layout" = 3 ] || fail "the FOR ALL TABLES subscriber is in layout $sub_layout after the publisher's move"
[ "$sub_markers" = 0 ] || fail "$sub_markers marker rows are left on the FOR ALL TABLES subscriber"
all_subscriber_agrees "after the publisher's move from layout 1"
sub_all -o /dev/null -c "DROP SUBSCRIPTION all_sub"
echo "OK: logical replication folds the initial sync and streamed rows; answers equal the publisher's"

#!/usr/bin/env bash
# test.sh: one major (a long fault or replication test; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# Hot standby: a primary (127.0.0.1:25464) and a streaming standby made with pg_basebackup -R
# (127.0.0.1:25465), both its own clusters, with data checksums, seen_bloom preloaded and
# wal_consistency_checking = 'all' (replay stops on any "inconsistent page", which fails the
# test). Tracked tables (bigint users; text users with a `where` predicate) and bloom values,
# part written before the base backup and part streamed.
#   - after replay (the standby's replay LSN reaches the primary's), every user's
#     seen_bloom.unseen over a candidate set, has_seen of every impression, seen_bloom.filter,
#     seen_bloom.stats and the bloom values answer on the standby exactly as on the primary;
#   - while 4 clients insert on the primary, 4 clients read with seen_bloom.unseen on the
#     standby without an error, and the answers agree again after replay;
#   - the standby refuses writes cleanly with SQLSTATE 25006: INSERT into a tracked table,
#     seen_bloom.track, seen_bloom.expire, CALL seen_bloom.rebuild, CALL seen_bloom.compact.
# Usage: hot_standby.sh PG_BIN PORT (PORT unused: the test runs its own clusters)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
primary_port=25464
standby_port=25465
seconds="${STANDBY_LOAD_SECONDS:-5}"
[ "${SEEN_BLOOM_LONG:-0}" = 1 ] && seconds="${STANDBY_LOAD_SECONDS:-60}"
db=seen_bloom_standby
make_work_dir
primary_dir="$(cluster_dir rel-primary)"
standby_dir="$(cluster_dir rel-standby)"
primary() { psql_at "$primary_port" "$db" "$@"; }
standby() { psql_at "$standby_port" "$db" "$@"; }

cluster_init "$primary_dir" "$primary_port" "wal_level = replica" "max_wal_senders = 4" "hot_standby = on" "${CHECKED_WAL_CONF[@]}"
cluster_enable_checksums "$primary_dir"
note "starting PostgreSQL ${PG_MAJOR} on 127.0.0.1:${primary_port} (wal_consistency_checking = 'all', data checksums)"
cluster_start "$primary_dir"
show_log_on_fail "$primary_dir/server.log" "$standby_dir/server.log"
psql_at "$primary_port" postgres -c "CREATE DATABASE $db"
primary -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON impressions (user_id);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
INSERT INTO impressions (user_id, post_id) SELECT u, u * 1000 + k FROM generate_series(1, 200) u, generate_series(1, u) k;
CREATE TABLE text_impressions (who text, what text, pct real);
SELECT seen_bloom.track('text_impressions', 'who', 'what', "where" => 'pct >= 0.5');
INSERT INTO text_impressions SELECT 'user-' || u, 'item-' || (u * 7 + k) % 2000, (k % 3) / 2.0 FROM generate_series(1, 80) u, generate_series(1, 3 * u) k;
CREATE TABLE not_tracked (user_id bigint, post_id bigint);
CREATE TABLE filters (id int PRIMARY KEY, f bloom);
INSERT INTO filters VALUES (1, (SELECT bloom_agg(g::bigint) FROM generate_series(1, 30000) g)),
                           (2, bloom_add(NULL::bloom, ARRAY['a', 'b', 'c']));
SQL

note "pg_basebackup -R into $standby_dir"
cluster_prepare_dir "$standby_dir"
run_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$standby_dir/data" -R -C -S seen_bloom_standby -X stream -c fast >"$WORK/basebackup.log" 2>&1 ||
    { cat "$WORK/basebackup.log"; fail "pg_basebackup"; }
cluster_configure "$standby_dir" "port = $standby_port" "unix_socket_directories = '$standby_dir'"
cluster_start "$standby_dir"
writer=""
stop_writer() { stop_process "$writer"; }
on_exit stop_writer
[ "$(standby -At -c "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"

# Streamed after the base backup: more impressions (new users and old ones), a new value.
primary -o /dev/null <<'SQL'
INSERT INTO impressions (user_id, post_id) SELECT u, 500000 + u * 100 + k FROM generate_series(150, 300) u, generate_series(1, 50) k;
INSERT INTO text_impressions SELECT 'user-' || u, 'late-' || u, 1 FROM generate_series(1, 100) u;
INSERT INTO filters VALUES (3, (SELECT bloom_agg('x' || g) FROM generate_series(1, 500) g));
SQL

# What both servers answer: every user, every read function, every value.
answers() {
    psql_at "$1" "$db" -At <<'SQL'
SELECT 'unseen', u, md5(seen_bloom.unseen('impressions', u::bigint,
           ARRAY(SELECT g::bigint FROM generate_series(1000, 301000) g WHERE g % 1000 <= 200
                 UNION ALL SELECT 500000 + g FROM generate_series(15000, 30100) g ORDER BY 1))::text),
       md5(seen_bloom.filter('impressions', u::bigint)::bytea)
FROM generate_series(0, 310) u
UNION ALL
SELECT 'text', u, seen_bloom.unseen('text_impressions', 'user-' || u,
                                    ARRAY(SELECT 'item-' || g FROM generate_series(0, 1999) g) || ('late-' || u))::text, ''
FROM generate_series(0, 101) u
UNION ALL
SELECT 'has_seen', 0, (SELECT count(*) FILTER (WHERE seen_bloom.has_seen('impressions', user_id, post_id)) || ' of ' || count(*) FROM impressions), ''
UNION ALL
SELECT 'bloom', id, md5(f::bytea),
       CASE WHEN coalesce(bloom_info(f)->>'item_family', 'integer') = 'integer' THEN bloom_unseen(f, ARRAY(SELECT g::bigint FROM generate_series(1, 31000, 7) g))::text END FROM filters
UNION ALL
SELECT 'stats', 0, s::text, '' FROM seen_bloom.stats('impressions') s
ORDER BY 1, 2;
SQL
}
wait_for_replay "$primary_port" "$standby_port" "$db"
answers "$primary_port" >"$WORK/primary.1" || fail "reading on the primary"
answers "$standby_port" >"$WORK/standby.1" 2>"$WORK/standby.err" || { cat "$WORK/standby.err"; fail "the read path fails on the standby"; }
diff -u "$WORK/primary.1" "$WORK/standby.1" >"$WORK/diff.1" || { head -20 "$WORK/diff.1"; fail "the standby answers differently after replay"; }
echo "    after replay: $(wc -l <"$WORK/standby.1") answers identical on the standby (unseen and filter() of 311 bigint users, unseen of 102 text users, has_seen $(grep '^has_seen' "$WORK/standby.1" | cut -d'|' -f3), stats, 3 bloom values)"

# Reads on the standby while the primary takes writes.
pgbench_insert_script 400 13 >"$WORK/insert.sql"
cat >"$WORK/read.sql" <<'SQL'
\set u random(1, 400)
\set c random(1, 1000000000)
SELECT cardinality(seen_bloom.unseen('impressions', :u::bigint, ARRAY(SELECT :c + g FROM generate_series(1, 1000) g)));
SQL
client_at "$primary_port" pgbench -n -c 4 -j 2 -T "$seconds" -f "$WORK/insert.sql" "$db" >"$WORK/writer.out" 2>&1 &
writer=$!
client_at "$standby_port" pgbench -n -c 4 -j 2 -T "$seconds" -f "$WORK/read.sql" "$db" >"$WORK/reader.out" 2>&1 ||
    { cat "$WORK/reader.out"; fail "reads on the standby failed during replay"; }
wait "$writer" || { cat "$WORK/writer.out"; fail "writes on the primary failed"; }
writer=""
wait_for_replay "$primary_port" "$standby_port" "$db"
answers "$primary_port" >"$WORK/primary.2"
answers "$standby_port" >"$WORK/standby.2"
diff -u "$WORK/primary.2" "$WORK/standby.2" >"$WORK/diff.2" || { head -20 "$WORK/diff.2"; fail "the standby answers differently after the second replay"; }
lag="$(primary -At -c "SELECT coalesce(max(replay_lag)::text, 'none') FROM pg_stat_replication")"
echo "    ${seconds}s of load: $(pgbench_transactions "$WORK/writer.out") batches of 20 on the primary (4 clients) while $(pgbench_transactions "$WORK/reader.out") unseen reads of 1,000 candidates ran on the standby (4 clients), no error; answers identical after replay (last replay lag: $lag)"

# Writes are refused with 25006 (read_only_sql_transaction).
refused=0
for sql in "INSERT INTO impressions (user_id, post_id) VALUES (1, 1)" \
    "INSERT INTO text_impressions VALUES ('user-1', 'x', 1)" \
    "SELECT seen_bloom.track('not_tracked', 'user_id', 'post_id')" \
    "SELECT seen_bloom.expire()" \
    "CALL seen_bloom.rebuild('impressions')" \
    "CALL seen_bloom.rebuild('impressions', 1::bigint)" \
    "CALL seen_bloom.compact('impressions')" \
    "UPDATE filters SET f = bloom_add(f, 1::bigint)"; do
    if standby -v VERBOSITY=verbose -c "$sql" >"$WORK/out" 2>&1; then
        fail "the standby accepted: $sql"
    fi
    grep -q "ERROR:  25006:" "$WORK/out" || { cat "$WORK/out"; fail "expected SQLSTATE 25006 for: $sql"; }
    refused=$((refused + 1))
    echo "      $sql: $(grep -m1 'ERROR' "$WORK/out" | sed 's/^ERROR:  //')" >>"$WORK/refused"
done
echo "    writes refused on the standby with SQLSTATE 25006: $refused of 8"
cat "$WORK/refused"
wal_records_report "$primary_port" "$db" "INSERT INTO impressions (user_id, post_id) SELECT u, 900000000 + u FROM generate_series(100, 200) u" "$primary_dir/data"
wait_for_replay "$primary_port" "$standby_port" "$db"
if grep -Ei "inconsistent page|PANIC:  |TRAP:|terminated by signal|corrupt" "$standby_dir/server.log" "$primary_dir/server.log"; then
    fail "errors in the server logs"
fi
echo "    ok"

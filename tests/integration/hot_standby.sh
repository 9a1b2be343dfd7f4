#!/usr/bin/env bash
# test.sh: one major (a long fault or replication test; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# Hot standby: a primary (127.0.0.1:55464) and a streaming standby made with pg_basebackup -R
# (127.0.0.1:55465), both its own clusters. Tracked tables (bigint users; text users with a
# `where` predicate) and bloom values, part written before the base backup and part streamed.
#   - after replay (the standby's replay LSN reaches the primary's), every user's
#     seen_bloom.unseen over a candidate set, has_seen of every impression, seen_bloom.filter,
#     seen_bloom.stats and the bloom values answer on the standby exactly as on the primary;
#   - while 4 clients insert on the primary, 4 clients read with seen_bloom.unseen on the
#     standby without an error, and the answers agree again after replay;
#   - the standby refuses writes cleanly with SQLSTATE 25006: INSERT into a tracked table,
#     seen_bloom.track, seen_bloom.expire, CALL seen_bloom.rebuild.
# Usage: hot_standby.sh PG_BIN PORT (PORT unused: the test runs its own clusters)
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/common.sh"
PG_BIN="$1"
primary_port=55464
standby_port=55465
seconds="${STANDBY_LOAD_SECONDS:-5}"
[ "${SEEN_BLOOM_LONG:-0}" = 1 ] && seconds="${STANDBY_LOAD_SECONDS:-60}"
db=seen_bloom_standby
work="$(mktemp -d)"
standby_dir="$(cluster_dir rel-standby)"
writer=""
cleanup() {
    if [ -n "$writer" ] && kill -0 "$writer" 2>/dev/null; then kill "$writer" 2>/dev/null || true; fi
    if [ -f "$standby_dir/data/postmaster.pid" ]; then
        run_pg "$PG_BIN/pg_ctl" -D "$standby_dir/data" -m fast -w stop >/dev/null || true
    fi
    stop_cluster
    rm -rf "$work"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
primary() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$primary_port" -U postgres -d "$db" "$@"; }
standby() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$standby_port" -U postgres -d "$db" "$@"; }
wait_replay() {
    local lsn
    lsn="$(primary -At -c "SELECT pg_current_wal_lsn()")"
    for _ in $(seq 1 300); do
        [ "$(standby -At -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")" = t ] && return 0
        sleep 0.2
    done
    fail "the standby did not replay up to $lsn within 60 s"
}

start_cluster "$(cluster_dir rel-primary)" "$primary_port" "wal_level = replica" "max_wal_senders = 4" "hot_standby = on"
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -c "CREATE DATABASE $db"
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
rm -rf "$standby_dir"
mkdir -p "$standby_dir"
chown postgres:postgres "$standby_dir" 2>/dev/null || true
run_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$standby_dir/data" -R -X stream -c fast >"$work/basebackup.log" 2>&1 ||
    { cat "$work/basebackup.log"; fail "pg_basebackup"; }
printf "port = %s\nunix_socket_directories = '%s'\n" "$standby_port" "$standby_dir" | run_pg tee -a "$standby_dir/data/postgresql.conf" >/dev/null
run_pg "$PG_BIN/pg_ctl" -D "$standby_dir/data" -l "$standby_dir/server.log" -w start >/dev/null
[ "$(standby -At -c "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"

# Streamed after the base backup: more impressions (new users and old ones), a new value.
primary -o /dev/null <<'SQL'
INSERT INTO impressions (user_id, post_id) SELECT u, 500000 + u * 100 + k FROM generate_series(150, 300) u, generate_series(1, 50) k;
INSERT INTO text_impressions SELECT 'user-' || u, 'late-' || u, 1 FROM generate_series(1, 100) u;
INSERT INTO filters VALUES (3, (SELECT bloom_agg('x' || g) FROM generate_series(1, 500) g));
SQL

# What both servers answer: every user, every read function, every value.
answers() {
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres -d "$db" -At <<'SQL'
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
wait_replay
answers "$primary_port" >"$work/primary.1" || fail "reading on the primary"
answers "$standby_port" >"$work/standby.1" 2>"$work/standby.err" || { cat "$work/standby.err"; fail "the read path fails on the standby"; }
diff -u "$work/primary.1" "$work/standby.1" >"$work/diff.1" || { head -20 "$work/diff.1"; fail "the standby answers differently after replay"; }
echo "    after replay: $(wc -l <"$work/standby.1") answers identical on the standby (unseen and filter() of 311 bigint users, unseen of 102 text users, has_seen $(grep '^has_seen' "$work/standby.1" | cut -d'|' -f3), stats, 3 bloom values)"

# Reads on the standby while the primary takes writes.
{
    echo '\set u random(1, 400)'
    echo '\set p random(1, 1000000000)'
    printf 'INSERT INTO impressions (user_id, post_id) VALUES '
    for k in $(seq 0 19); do
        [ "$k" -gt 0 ] && printf ', '
        printf '((:u + %d * 13) %% 400 + 1, :p + %d)' "$k" "$k"
    done
    echo ';'
} >"$work/insert.sql"
cat >"$work/read.sql" <<'SQL'
\set u random(1, 400)
\set c random(1, 1000000000)
SELECT cardinality(seen_bloom.unseen('impressions', :u::bigint, ARRAY(SELECT :c + g FROM generate_series(1, 1000) g)));
SQL
"$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$primary_port" -U postgres -c 4 -j 2 -T "$seconds" -f "$work/insert.sql" "$db" >"$work/writer.out" 2>&1 &
writer=$!
"$PG_BIN/pgbench" -n -h 127.0.0.1 -p "$standby_port" -U postgres -c 4 -j 2 -T "$seconds" -f "$work/read.sql" "$db" >"$work/reader.out" 2>&1 ||
    { cat "$work/reader.out"; fail "reads on the standby failed during replay"; }
wait "$writer" || { cat "$work/writer.out"; fail "writes on the primary failed"; }
writer=""
tx() { sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1"; }
wait_replay
answers "$primary_port" >"$work/primary.2"
answers "$standby_port" >"$work/standby.2"
diff -u "$work/primary.2" "$work/standby.2" >"$work/diff.2" || { head -20 "$work/diff.2"; fail "the standby answers differently after the second replay"; }
lag="$(primary -At -c "SELECT coalesce(max(replay_lag)::text, 'none') FROM pg_stat_replication")"
echo "    ${seconds}s of load: $(tx "$work/writer.out") batches of 20 on the primary (4 clients) while $(tx "$work/reader.out") unseen reads of 1,000 candidates ran on the standby (4 clients), no error; answers identical after replay (last replay lag: $lag)"

# Writes are refused with 25006 (read_only_sql_transaction).
refused=0
for sql in "INSERT INTO impressions (user_id, post_id) VALUES (1, 1)" \
    "INSERT INTO text_impressions VALUES ('user-1', 'x', 1)" \
    "SELECT seen_bloom.track('not_tracked', 'user_id', 'post_id')" \
    "SELECT seen_bloom.expire()" \
    "CALL seen_bloom.rebuild('impressions')" \
    "CALL seen_bloom.rebuild('impressions', 1::bigint)" \
    "UPDATE filters SET f = bloom_add(f, 1::bigint)"; do
    if standby -v VERBOSITY=verbose -c "$sql" >"$work/out" 2>&1; then
        fail "the standby accepted: $sql"
    fi
    grep -q "ERROR:  25006:" "$work/out" || { cat "$work/out"; fail "expected SQLSTATE 25006 for: $sql"; }
    refused=$((refused + 1))
    echo "      $sql: $(grep -m1 'ERROR' "$work/out" | sed 's/^ERROR:  //')" >>"$work/refused"
done
echo "    writes refused on the standby with SQLSTATE 25006: $refused of 7"
cat "$work/refused"
if grep -Ei "PANIC:  |TRAP:|terminated by signal|corrupt" "$standby_dir/server.log" "$CLUSTER_DIR/server.log"; then
    fail "errors in the server logs"
fi
echo "    ok"

#!/usr/bin/env bash
# DROP EXTENSION seen_bloom with tracked tables (one with a where predicate, whose generated
# fold function the INSERT trigger calls; one partitioned; one in the middle of a retrack):
#   - without CASCADE it is refused (2BP01) and names the filter tables;
#   - with CASCADE nothing seen_bloom made is left: no filter table, no generated function,
#     no seen_bloom trigger, and INSERTs into the tables work (a leftover trigger of the
#     predicate's table failed them);
#   - CREATE EXTENSION and track again under the same names then work.
# Usage: drop_extension.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_drop_extension
make_work_dir
recreate_database "$PORT" "$db"
q() { psql_at "$PORT" "$db" -At "$@"; }
track_all() {
    q -o /dev/null <<'SQL'
SET client_min_messages = warning;
SELECT seen_bloom.track('plain', 'user_id', 'post_id', 'seen_at');
SELECT seen_bloom.track('watched', 'user_id', 'post_id', 'seen_at', "where" => 'pct >= 0.5');
SELECT seen_bloom.track('parted', 'user_id', 'post_id', 'seen_at');
INSERT INTO plain (user_id, post_id) VALUES (1, 10);
INSERT INTO watched (user_id, post_id, pct) VALUES (1, 10, 0.9);
INSERT INTO parted (user_id, post_id) VALUES (1, 10);
SQL
}
q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE plain (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE watched (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now(), pct real);
CREATE TABLE parted (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now()) PARTITION BY RANGE (seen_at);
CREATE TABLE parted_now PARTITION OF parted FOR VALUES FROM ('2000-01-01') TO ('2100-01-01');
SQL
track_all
# A retrack stopped after its start (its filter table and triggers exist).
q -o /dev/null -c "SELECT seen_bloom._retrack_start(t, NULL, NULL, NULL, 6) FROM seen_bloom.tracked t WHERE impressions = 'watched'::regclass"
made="SELECT (SELECT count(*) FROM pg_class WHERE relname LIKE '%\_seen%' AND relkind = 'r') || ' tables, '
    || (SELECT count(*) FROM pg_proc WHERE proname LIKE '%\_seen\_%') || ' functions, '
    || (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'seen\_bloom\_%') || ' triggers'"
before="$(q -c "$made")"
note "tracked: $before"
case "$before" in "0 tables"*) fail "nothing was made: $before" ;; esac

if q -c "DROP EXTENSION seen_bloom" >"$WORK/drop.out" 2>&1; then
    fail "DROP EXTENSION without CASCADE dropped the extension of tracked tables"
fi
grep -q "cannot drop extension seen_bloom because other objects depend on it" "$WORK/drop.out" ||
    fail "DROP EXTENSION failed otherwise: $(cat "$WORK/drop.out")"
grep -q "table plain_seen depends on extension seen_bloom" "$WORK/drop.out" ||
    fail "the refusal does not name the filter table: $(cat "$WORK/drop.out")"
note "without CASCADE: $(head -n 1 "$WORK/drop.out")"

q -c "SET client_min_messages = warning" -c "DROP EXTENSION seen_bloom CASCADE" >/dev/null
after="$(q -c "$made")"
note "after DROP EXTENSION ... CASCADE: $after"
[ "$after" = "0 tables, 0 functions, 0 triggers" ] || fail "DROP EXTENSION ... CASCADE left $after"
q -o /dev/null -c "INSERT INTO plain (user_id, post_id) VALUES (2, 20)" \
    -c "INSERT INTO watched (user_id, post_id, pct) VALUES (2, 20, 0.9)" \
    -c "INSERT INTO parted (user_id, post_id) VALUES (2, 20)" || fail "an INSERT failed after DROP EXTENSION ... CASCADE"

q -o /dev/null -c "SET client_min_messages = warning" -c "CREATE EXTENSION seen_bloom"
track_all
seen="$(q -c "SELECT seen_bloom.unseen('plain', 2::bigint, ARRAY[20, 21]::bigint[])::text || seen_bloom.unseen('watched', 2::bigint, ARRAY[20, 21]::bigint[])::text")"
note "tracked again: unseen of user 2 in plain and watched: $seen"
[ "$seen" = "{21}{21}" ] || fail "after CREATE EXTENSION and track again, user 2 reads $seen (the backfill missed its impression)"
echo "OK: DROP EXTENSION refuses while tables are tracked, CASCADE leaves nothing, and tracking starts again"

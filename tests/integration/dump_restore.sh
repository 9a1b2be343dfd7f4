#!/usr/bin/env bash
# test.sh: one major (a long fault or replication test; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# pg_dump -Fc / pg_restore of a database with tracked tables (bigint users with a `where`
# predicate and some rows outside the window, text users, uuid users) and a table of bloom
# values, into a new database. Then:
#   - the tracking configuration, the triggers and the trigger functions come back,
#   - the filter tables come back byte for byte, written once by the restore (no update: the
#     triggers, created after the data, did not fold the restored rows again), and every user's
#     seen_bloom.unseen over a candidate set answers as in the source, and so do the bloom values,
#   - the same new impressions inserted into both databases leave the filter tables equal
#     again and are seen (tracking works after a restore),
#   - COPY ... (FORMAT binary) of the bloom values round-trips byte for byte (file and values),
#     within the database and into the restored one.
# Usage: dump_restore.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
src=seen_bloom_dump_src
dst=seen_bloom_dump_dst
make_work_dir

psql_at "$PORT" postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $src" -c "DROP DATABASE IF EXISTS $dst" -c "CREATE DATABASE $src"
psql_at "$PORT" "$src" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real NOT NULL DEFAULT 1);
CREATE INDEX ON impressions (user_id);
-- Rows of every kind: in the window and passing the predicate, failing it (watch_pct < 0.5),
-- older than the window, anonymous (NULL user).
INSERT INTO impressions (user_id, post_id, seen_at, watch_pct)
SELECT u, (u * 7919 + k) % 50000, now() - ((k % 40) || ' days')::interval, CASE WHEN k % 7 = 0 THEN 0.2 ELSE 0.8 END
FROM generate_series(1, 300) u, generate_series(1, u) k;
INSERT INTO impressions (user_id, post_id) SELECT NULL, g FROM generate_series(1, 10) g;
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at', "where" => 'watch_pct >= 0.5');

CREATE SCHEMA feed;
CREATE TABLE feed."Text Impressions" (who text, what text, at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('feed."Text Impressions"', 'who', 'what', 'at', "window" => '7 days', capacity => 5000, error_rate => 0.001);
INSERT INTO feed."Text Impressions" (who, what) SELECT 'user-' || u, 'item-' || (u * 31 + k) % 3000 FROM generate_series(1, 100) u, generate_series(1, 2 * u) k;

CREATE TABLE uuid_impressions (account uuid, video int);
SELECT seen_bloom.track('uuid_impressions', 'account', 'video');
INSERT INTO uuid_impressions SELECT md5(u::text)::uuid, u * 100 + k FROM generate_series(1, 50) u, generate_series(1, 60) k;

CREATE TABLE filters (id int PRIMARY KEY, f bloom);
INSERT INTO filters VALUES
    (1, bloom_add(NULL::bloom, ARRAY[1, 2, 3]::bigint[])),
    (2, (SELECT bloom_agg(g::bigint) FROM generate_series(1, 20000) g)),
    (3, (SELECT bloom_agg('k' || g, 1000, 0.001) FROM generate_series(1, 6000) g)),
    (4, (SELECT bloom_add(bloom_empty(5000, 0.01, false), array_agg(md5(g::text)::uuid)) FROM generate_series(1, 4000) g)),
    (5, bloom_empty()),
    (6, NULL);
SQL

# Everything the tracked tables and bloom values answer, one line per user or value.
answers() {
    psql_at "$PORT" "$1" -At <<'SQL'
SELECT 'bigint', u, seen_bloom.unseen('impressions', u::bigint, ARRAY(SELECT g::bigint FROM generate_series(0, 49999) g))::text
FROM generate_series(0, 301) u
UNION ALL
SELECT 'text', u, seen_bloom.unseen('feed."Text Impressions"', 'user-' || u, ARRAY(SELECT 'item-' || g FROM generate_series(0, 2999) g))::text
FROM generate_series(0, 101) u
UNION ALL
SELECT 'uuid', u, seen_bloom.unseen('uuid_impressions', md5(u::text)::uuid, ARRAY(SELECT g FROM generate_series(0, 5199) g))::text
FROM generate_series(0, 51) u
UNION ALL
-- (Each value is probed with the item families it accepts: another is 42804.)
SELECT 'bloom', id, concat_ws(' ', md5(f::bytea),
                           CASE WHEN coalesce(bloom_info(f)->>'item_family', 'integer') = 'integer' THEN bloom_unseen(f, ARRAY(SELECT g::bigint FROM generate_series(1, 25000) g))::text END,
                           CASE WHEN coalesce(bloom_info(f)->>'item_family', 'text') = 'text' THEN bloom_contains(f, ARRAY(SELECT 'k' || g FROM generate_series(1, 7000) g))::text END,
                           CASE WHEN coalesce(bloom_info(f)->>'item_family', 'uuid') = 'uuid' THEN bloom_contains(f, ARRAY(SELECT md5(g::text)::uuid FROM generate_series(1, 5000) g))::text END)
FROM filters
ORDER BY 1, 2;
SQL
}
# The filter tables' rows, the configuration and the tracking objects.
tracking_state() {
    psql_at "$PORT" "$1" -At <<'SQL'
SELECT 'config', impressions::text, filter_table::text, user_column, item_column, time_column, user_type::text, item_type::text,
       "window"::text, generations, generation_seconds, capacity, error_rate, error_rate_per_generation, "where", tracked_at
FROM seen_bloom.tracked ORDER BY impressions::text;
SELECT 'trigger', tgrelid::regclass::text, tgname, tgfoid::regprocedure::text, tgtype, tgenabled, tgnewtable, tgargs
FROM pg_trigger WHERE NOT tgisinternal ORDER BY 2, 3;
SELECT 'function', p.oid::regprocedure::text, p.prosecdef, p.proconfig::text, coalesce(p.proacl, acldefault('f', p.proowner))::text, md5(p.prosrc)
FROM pg_proc p WHERE p.proname LIKE '%seen\_fold' OR p.proname LIKE '%seen\_truncate' ORDER BY 2;
-- Effective privileges (a NULL ACL is the owner's default: pg_dump restores it as NULL).
SELECT 'table', c.oid::regclass::text, coalesce(c.relacl, acldefault('r', c.relowner))::text, c.reloptions::text
FROM pg_class c WHERE c.relname LIKE '%seen' AND c.relkind = 'r' ORDER BY 2;
SELECT 'rows', 'impressions_seen', count(*), md5(string_agg(user_key || '/' || generation || '/' || layer || '/' || segment || '/' || encode(bits, 'hex'), ',' ORDER BY user_key, generation, layer, segment)) FROM impressions_seen;
SELECT 'rows', 'Text Impressions_seen', count(*), md5(string_agg(user_key || '/' || generation || '/' || layer || '/' || segment || '/' || encode(bits, 'hex'), ',' ORDER BY user_key, generation, layer, segment)) FROM feed."Text Impressions_seen";
SELECT 'rows', 'uuid_impressions_seen', count(*), md5(string_agg(user_key || '/' || generation || '/' || layer || '/' || segment || '/' || encode(bits, 'hex'), ',' ORDER BY user_key, generation, layer, segment)) FROM uuid_impressions_seen;
SQL
}

answers "$src" >"$WORK/answers.src"
tracking_state "$src" >"$WORK/state.src"
client_at "$PORT" pg_dump -Fc -f "$WORK/dump" "$src"
psql_at "$PORT" postgres -c "CREATE DATABASE $dst"
client_at "$PORT" pg_restore --exit-on-error -d "$dst" "$WORK/dump"
echo "    pg_dump -Fc: $(stat -c %s "$WORK/dump") bytes, $("$PG_BIN/pg_restore" -l "$WORK/dump" | grep -vc '^;') entries; pg_restore into a new database: ok"

# The restore wrote each filter row once and never updated one: the tracking triggers did not
# fire on the restored impressions (pg_restore creates triggers after loading the data).
sleep 1
writes="$(psql_at "$PORT" "$dst" -At -c "SELECT sum(n_tup_ins), sum(n_tup_upd + n_tup_del) FROM pg_stat_user_tables WHERE relname LIKE '%seen'")"
restored_ins="${writes%%|*}"
restored_upd="${writes##*|}"
answers "$dst" >"$WORK/answers.dst"
tracking_state "$dst" >"$WORK/state.dst"
diff -u "$WORK/state.src" "$WORK/state.dst" >"$WORK/state.diff" || { cat "$WORK/state.diff"; fail "configuration, triggers or filter rows differ after the restore"; }
diff -u "$WORK/answers.src" "$WORK/answers.dst" >"$WORK/answers.diff" || { head -20 "$WORK/answers.diff"; fail "answers differ after the restore"; }
configs="$(grep -c '^config|' "$WORK/state.dst")"
# Per tracked table (the extension's own trigger on seen_bloom.tracked is compared, not counted).
triggers="$(grep '^trigger|' "$WORK/state.dst" | grep -vc '^trigger|seen_bloom.tracked|')"
functions="$(grep -c '^function|' "$WORK/state.dst")"
rows="$(awk -F'|' '$1 == "rows" { n += $3 } END { print n }' "$WORK/state.dst")"
# The restored filter still honours the predicate and the window: the rows they exclude are
# not seen (but for the odd false positive), the others all are.
kinds="$(psql_at "$PORT" "$dst" -At -c "
SELECT count(*) FILTER (WHERE included AND NOT seen), count(*) FILTER (WHERE included),
       count(*) FILTER (WHERE NOT included AND seen), count(*) FILTER (WHERE NOT included)
FROM (SELECT watch_pct >= 0.5 AND seen_at >= now() - interval '30 days' AS included,
             seen_bloom.has_seen('impressions', user_id, post_id) AS seen
      FROM impressions WHERE user_id IS NOT NULL) s")"
IFS='|' read -r missed included excluded_seen excluded <<<"$kinds"
echo "    restored: $configs tracked tables (configuration equal), $triggers triggers, $functions trigger functions, $rows filter rows byte-identical to the source"
echo "    filter rows written by the restore: $restored_ins inserted, $restored_upd updated or deleted (no folding of restored rows)"
{ [ "$restored_ins" -eq "$rows" ] && [ "$restored_upd" -eq 0 ]; } || fail "the restore folded impressions into the filter tables"
echo "    answers: $(wc -l <"$WORK/answers.dst") users and bloom values answer identically; restored bigint table: $missed of $included impressions not seen, $excluded_seen of $excluded excluded rows (where predicate, window) seen"
{ [ "$missed" -eq 0 ] && [ "$included" -gt 0 ] && [ "$excluded" -gt 0 ] && [ $((excluded_seen * 100)) -le "$excluded" ]; } ||
    fail "the restored filter does not honour the predicate and the window"
# (4 triggers per tracked table; a truncate and a replica fold function per table, a generated fold function
# where the table needs one: what they are is compared above, source against restored.)
{ [ "$configs" -eq 3 ] && [ "$triggers" -eq 12 ] && [ "$functions" -ge 3 ] && [ "$rows" -gt 0 ]; } || fail "expected 3 configurations, 12 triggers, 3 or more functions"

# Tracking after the restore: the same new impressions in both databases.
new_rows="INSERT INTO impressions (user_id, post_id, watch_pct) SELECT u, 60000 + u * 10 + k, 0.9 FROM generate_series(1, 320) u, generate_series(0, 4) k;
INSERT INTO feed.\"Text Impressions\" (who, what) SELECT 'user-' || u, 'new-' || u FROM generate_series(1, 120) u;
INSERT INTO uuid_impressions SELECT md5(u::text)::uuid, 900000 + u FROM generate_series(1, 60) u;"
psql_at "$PORT" "$src" -c "$new_rows"
psql_at "$PORT" "$dst" -c "$new_rows"
tracking_state "$src" | grep '^rows|' >"$WORK/rows.src"
tracking_state "$dst" | grep '^rows|' >"$WORK/rows.dst"
diff -u "$WORK/rows.src" "$WORK/rows.dst" || fail "filter rows differ after the same inserts into both databases"
unseen="$(psql_at "$PORT" "$dst" -At -c "
SELECT (SELECT count(*) FROM impressions WHERE post_id >= 60000 AND NOT seen_bloom.has_seen('impressions', user_id, post_id))
     + (SELECT count(*) FROM feed.\"Text Impressions\" WHERE what LIKE 'new-%' AND NOT seen_bloom.has_seen('feed.\"Text Impressions\"', who, what))
     + (SELECT count(*) FROM uuid_impressions WHERE video > 900000 AND NOT seen_bloom.has_seen('uuid_impressions', account, video))")"
echo "    after the restore: 1,780 new impressions, filter rows equal to the source's after the same inserts, not seen: $unseen"
[ "$unseen" -eq 0 ] || fail "new impressions not seen after the restore"

# COPY (FORMAT binary) of bloom values: out, in, out again.
psql_at "$PORT" "$src" -c "\\copy filters TO '$WORK/filters.bin' (FORMAT binary)"
psql_at "$PORT" "$src" -c "CREATE TABLE filters_copy (LIKE filters)" -c "\\copy filters_copy FROM '$WORK/filters.bin' (FORMAT binary)" \
    -c "\\copy (SELECT * FROM filters_copy ORDER BY id) TO '$WORK/filters2.bin' (FORMAT binary)"
psql_at "$PORT" "$dst" -c "CREATE TABLE filters_copy (LIKE filters)" -c "\\copy filters_copy FROM '$WORK/filters.bin' (FORMAT binary)"
psql_at "$PORT" "$src" -c "\\copy (SELECT * FROM filters ORDER BY id) TO '$WORK/filters1.bin' (FORMAT binary)"
cmp "$WORK/filters1.bin" "$WORK/filters2.bin" || fail "COPY BINARY out of the copied values differs from the original's"
differ_src="$(psql_at "$PORT" "$src" -At -c "SELECT count(*) FROM filters a FULL JOIN filters_copy b USING (id) WHERE a.f::bytea IS DISTINCT FROM b.f::bytea")"
differ_dst="$(psql_at "$PORT" "$dst" -At -c "SELECT count(*) FROM filters a FULL JOIN filters_copy b USING (id) WHERE a.f::bytea IS DISTINCT FROM b.f::bytea")"
echo "    COPY (FORMAT binary): $(psql_at "$PORT" "$src" -At -c "SELECT count(*) FROM filters") values, $(stat -c %s "$WORK/filters.bin") bytes; copied back: $differ_src differ; into the restored database: $differ_dst differ; second export byte-identical"
{ [ "$differ_src" -eq 0 ] && [ "$differ_dst" -eq 0 ]; } || fail "COPY BINARY round trip changed values"

psql_at "$PORT" postgres -c "DROP DATABASE $src" -c "DROP DATABASE $dst"
echo "    ok"

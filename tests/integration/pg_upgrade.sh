#!/usr/bin/env bash
# test.sh: once
# pg_upgrade from PostgreSQL 15 to 17 of a cluster holding tracked impression tables and stored
# bloom values: after the upgrade every stored filter answers exactly as before.
#   - a PostgreSQL 15 cluster (port 25500) with the release extension: two tracked tables
#     (bigint users and items with a time column, 300 users from a few to 1,500 impressions so
#     both exact rows and split-block layers over several generations are stored; text users
#     and items without one) and a table of bloom values of every representation (exact,
#     fixed, scaling with several layers, a union, text and uuid items, TOASTed ones);
#   - the answers recorded: seen_bloom.unseen over 3,000 candidates for every user of both
#     tracked tables, bloom_contains over 40,000 candidates for every stored value, the stored
#     bytes (md5) and seen_bloom.stats;
#   - pg_upgrade (copy mode) into a new PostgreSQL 17 cluster (port 25501) with the release
#     extension installed, then the same answers compared line by line; finally new
#     impressions are inserted into the upgraded cluster and must be reported seen.
# Usage: pg_upgrade.sh [PG_BIN PORT] (both ignored: it runs its own clusters). PostgreSQL 15
# and 17 come from scripts/pg_majors.sh (scripts/test.sh sets up 17 when it runs this test);
# without them the test is skipped with a message. PG_UPGRADE_TO=18 upgrades to 18 instead.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
cd "$ROOT" || exit 1

old_major=15
new_major="${PG_UPGRADE_TO:-17}"
old_port=25500
new_port=25501
for m in "$old_major" "$new_major"; do
    if ! pg_major_ready "$m"; then
        skip "PostgreSQL $m is not set up (run scripts/pg_majors.sh $old_major $new_major, or scripts/test.sh which does)"
    fi
done
old_bin="$(pg_bin_of "$old_major")"
new_bin="$(pg_bin_of "$new_major")"
work="$(cluster_dir majors-upgrade)"
db=seen_bloom_upgrade

step "pg_upgrade ${old_major} -> ${new_major}: release extension into both"
use_pg_major "$old_major"
install_extension
use_pg_major "$new_major"
install_extension

# The clusters: the old one made and run by the old major's binaries, the new one by the new
# major's (PG_BIN, from use_pg_major, is the major of the phase below; psql_at uses it too).
old_cluster="$work/old"
new_cluster="$work/new"
cluster_prepare_dir "$work"

step "PostgreSQL ${old_major}: a cluster with tracked tables and stored filters"
use_pg_major "$old_major"
cluster_new "$old_cluster" "$old_port"
psql_at "$old_port" postgres -c "CREATE DATABASE $db"
t0=$SECONDS
psql_at "$old_port" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;

-- bigint users and items, a time column: impressions over the last 18 days (several
-- generations of the 30-day window, none close to leaving it during the test).
CREATE TABLE impressions (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
SELECT setseed(0.15);
-- users 1..250: 1..60 impressions (exact rows); 251..300: 1,500 (split-block layers)
INSERT INTO impressions
SELECT u, 1 + floor(random() * 5000)::bigint, now() - random() * interval '18 days'
FROM generate_series(1, 300) u,
     generate_series(1, CASE WHEN u <= 250 THEN 1 + u % 60 ELSE 1500 END) k;

-- text users and items, no time column (impressions count at now())
CREATE TABLE views (viewer text, item text);
SELECT seen_bloom.track('views', 'viewer', 'item', capacity => 2000, error_rate => 0.001);
INSERT INTO views
SELECT 'viewer-' || v, 'item-' || (1 + floor(random() * 5000)::int)
FROM generate_series(1, 40) v, generate_series(1, 20 * v) k;

-- bloom values of every representation; some large enough to be stored out of line
CREATE TABLE filters (id int PRIMARY KEY, what text, f bloom);
INSERT INTO filters VALUES
  (1, 'exact, 100 bigints', bloom_add(NULL::bloom, ARRAY(SELECT generate_series(1, 100)::bigint))),
  (2, 'bloom_agg of 20,000 (default shape)', (SELECT bloom_agg(g::bigint) FROM generate_series(1, 20000) g)),
  (3, 'fixed 1,000 at 0.1%, 900 items', bloom_add(bloom_empty(1000, 0.001, false), ARRAY(SELECT generate_series(1, 1800, 2)::bigint))),
  (4, 'scaling 500 at 1%, 5,000 items (layers)', bloom_add(bloom_empty(500, 0.01), ARRAY(SELECT generate_series(1, 5000)::bigint))),
  (5, 'text items', (SELECT bloom_agg('k' || g) FROM generate_series(1, 8000) g)),
  (6, 'uuid items', (SELECT bloom_agg(md5(g::text)::uuid) FROM generate_series(1, 3000) g)),
  (7, 'union of two aggregates', (SELECT bloom_agg(g::bigint) FROM generate_series(1, 20000) g)
                                 || (SELECT bloom_agg(g::bigint) FROM generate_series(15000, 30000) g)),
  (8, 'bloom_union_agg of per-user filters',
      (SELECT bloom_union_agg(seen_bloom.filter('impressions', u::bigint)) FROM generate_series(1, 300) u));
SQL
psql_at "$old_port" "$db" -At -c "SELECT 'impressions ' || count(*) FROM impressions" \
    -c "SELECT 'views ' || count(*) FROM views" \
    -c "SELECT 'filter table rows ' || (SELECT count(*) FROM impressions_seen) || ' + ' || (SELECT count(*) FROM views_seen)" \
    -c "SELECT 'stored values ' || count(*) || ', ' || sum(pg_column_size(f)) || ' bytes' FROM filters" | sed 's/^/    /'
note "loaded in $((SECONDS - t0)) s"

# Everything the stored filters answer, in a stable order.
answers() { # PORT FILE
    psql_at "$1" "$db" -At -F ' ' -o "$2" <<'SQL'
SET client_min_messages = warning;
SELECT 'unseen', u, cardinality(r), md5(r::text)
FROM generate_series(1, 300) u,
     LATERAL (SELECT seen_bloom.unseen('impressions', u::bigint, ARRAY(SELECT generate_series(1, 3000)::bigint)) r) s
ORDER BY u;
SELECT 'unseen-text', v, cardinality(r), md5(r::text)
FROM generate_series(1, 40) v,
     LATERAL (SELECT seen_bloom.unseen('views', 'viewer-' || v, ARRAY(SELECT 'item-' || generate_series(1, 3000))) r) s
ORDER BY v;
SELECT 'has_seen', count(*) FILTER (WHERE seen_bloom.has_seen('impressions', user_id, post_id)), count(*)
FROM impressions;
SELECT 'contains', id, md5(f::bytea),
       CASE WHEN coalesce(bloom_info(f)->>'item_family', 'integer') = 'integer' THEN (SELECT count(*) FILTER (WHERE x) FROM unnest(bloom_contains(f, ARRAY(SELECT generate_series(1, 40000)::bigint))) x) END,
       md5(CASE WHEN coalesce(bloom_info(f)->>'item_family', 'integer') = 'integer' THEN bloom_contains(f, ARRAY(SELECT generate_series(1, 40000)::bigint))::text END),
       md5(CASE WHEN coalesce(bloom_info(f)->>'item_family', 'text') = 'text' THEN bloom_contains(f, ARRAY(SELECT 'k' || generate_series(1, 40000)))::text END),
       md5(CASE WHEN coalesce(bloom_info(f)->>'item_family', 'uuid') = 'uuid' THEN bloom_contains(f, ARRAY(SELECT md5(generate_series(1, 6000)::text)::uuid))::text END),
       bloom_cardinality(f), bloom_info(f)->>'representation', bloom_info(f)->>'layers'
FROM filters ORDER BY id;
-- The false-positive estimates are float8 means over users: the order the aggregate meets
-- them in follows the plan's hash tables, which differ between majors, so their last digit
-- may too (0.0004627561309241487 against 0.000462756130924149 once). Compared to 15 places.
SELECT 'stats', s.users, s.filter_rows, s.total_bytes, s.bytes_per_user_mean, s.bytes_per_user_max,
       s.generations, s.saturated_generations,
       round(s.estimated_fpr_mean::numeric, 15), round(s.estimated_fpr_max::numeric, 15)
FROM seen_bloom.stats('impressions') s;
SELECT 'stats-text', s.users, s.filter_rows, s.total_bytes, s.bytes_per_user_mean, s.bytes_per_user_max,
       s.generations, s.saturated_generations,
       round(s.estimated_fpr_mean::numeric, 15), round(s.estimated_fpr_max::numeric, 15)
FROM seen_bloom.stats('views') s;
SELECT 'filter-rows', md5(string_agg(t::text, ',' ORDER BY t::text)) FROM impressions_seen t;
SQL
}
answers "$old_port" "$work/before.txt"
note "answers before: $(grep -c '^unseen ' "$work/before.txt") + $(grep -c '^unseen-text ' "$work/before.txt") users x 3,000 candidates, $(grep -c '^contains ' "$work/before.txt") stored values x 40,000 candidates"
grep '^has_seen\|^stats' "$work/before.txt" | sed 's/^/    /'
# Debian's PostgreSQL 15.20 (15.20-0+deb12u1) records an attribute option `pg_attver` on every
# column it creates, which the 17 server does not know: its restore of the dumped schema stops
# at the first ALTER COLUMN ... SET (pg_attver=...) with "unrecognized parameter", for any
# table, seen_bloom's or not. Where the old server wrote it, the option is removed from the
# user columns before the upgrade (it is the only thing of the dump the new server refuses).
for database in $(psql_at "$old_port" postgres -At -c "SELECT datname FROM pg_database WHERE datallowconn"); do
    stripped="$(psql_at "$old_port" "$database" -At <<'SQL'
WITH s AS (
    UPDATE pg_catalog.pg_attribute
    SET attoptions = NULLIF(ARRAY(SELECT o FROM unnest(attoptions) o WHERE o NOT LIKE 'pg_attver=%'), '{}')
    WHERE attrelid >= 16384 AND attoptions::text LIKE '%pg_attver=%'
    RETURNING 1)
SELECT count(*) FROM s;
SQL
)"
    [ "$stripped" = 0 ] || note "$database: removed the attribute option pg_attver (written by this PostgreSQL ${old_major} build, unknown to ${new_major}) from $stripped user columns"
done
cluster_stop "$old_cluster"

step "pg_upgrade to PostgreSQL ${new_major}"
use_pg_major "$new_major"
cluster_init "$new_cluster" "$new_port"
t0=$SECONDS
# pg_upgrade writes its logs and sockets in the current directory: one postgres owns.
(cd "$work" && run_pg "$new_bin/pg_upgrade" -b "$old_bin" -B "$new_bin" -d "$old_cluster/data" -D "$new_cluster/data" \
    -p "$old_port" -P "$new_port" -U postgres -s "$work" >"$work/pg_upgrade.log" 2>&1) || {
    cat "$work/pg_upgrade.log"
    find "$new_cluster/data" -path '*pg_upgrade_output.d*' -name '*.log' -exec tail -n 30 {} + 2>/dev/null || true
    fail "pg_upgrade"
}
grep -i 'upgrade complete\|performing upgrade' "$work/pg_upgrade.log" | sed 's/^/    /' || true
note "pg_upgrade took $((SECONDS - t0)) s"
cluster_start "$new_cluster"
psql_at "$new_port" "$db" -At -c "SELECT 'server ' || current_setting('server_version') || ', seen_bloom ' || extversion FROM pg_extension WHERE extname = 'seen_bloom'" | sed 's/^/    /'

answers "$new_port" "$work/after.txt"
if ! diff -u "$work/before.txt" "$work/after.txt" >"$work/answers.diff"; then
    head -n 40 "$work/answers.diff"
    fail "the upgraded cluster answers differently ($(grep -c '^[-+][a-z]' "$work/answers.diff") changed lines)"
fi
note "answers after the upgrade: identical ($(wc -l <"$work/after.txt") lines compared)"

step "Tracking keeps working after the upgrade"
seen="$(psql_at "$new_port" "$db" -At <<'SQL'
SET client_min_messages = warning;
INSERT INTO impressions VALUES (7, 900001, now()), (300, 900002, now()), (301, 900003, now());
INSERT INTO views VALUES ('viewer-3', 'new-item');
SELECT seen_bloom.has_seen('impressions', 7::bigint, 900001::bigint)
   AND seen_bloom.has_seen('impressions', 300::bigint, 900002::bigint)
   AND seen_bloom.has_seen('impressions', 301::bigint, 900003::bigint)
   AND seen_bloom.has_seen('views', 'viewer-3'::text, 'new-item'::text)
   AND seen_bloom.unseen('impressions', 7::bigint, ARRAY[900001, 900004]::bigint[]) = ARRAY[900004]::bigint[];
SQL
)"
if [ "$seen" != t ]; then
    fail "impressions inserted after the upgrade are not reported seen ($seen)"
fi
note "new impressions in the upgraded cluster are reported seen"
cluster_stop "$new_cluster"
rm -rf "$work"
echo "    pg_upgrade ${old_major} -> ${new_major}: PASS"

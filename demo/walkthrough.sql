-- A short walk-through of the bloom type: what a feed does with it.
\pset footer off
CREATE EXTENSION seen_bloom;

\echo '== One row per user; impressions fold in with an upsert (a NULL filter starts a default one)'
CREATE TABLE seen (user_id bigint PRIMARY KEY, filter bloom);
INSERT INTO seen (user_id, filter)
SELECT u, bloom_add(NULL::bloom, ARRAY(SELECT g FROM generate_series(1, 50) g WHERE g % u = 0))
FROM generate_series(1, 3) u;
INSERT INTO seen (user_id, filter) VALUES (1, bloom_add(NULL::bloom, 777::bigint))
ON CONFLICT (user_id) DO UPDATE SET filter = bloom_add(seen.filter, 777::bigint);
SELECT user_id, bloom_cardinality(filter) AS items, pg_column_size(filter) AS bytes,
       bloom_info(filter)->>'representation' AS representation
FROM seen ORDER BY user_id;

\echo '== The feed filter: over-fetched candidates minus what the user saw, order kept, repeats dropped'
SELECT user_id, bloom_unseen(filter, ARRAY[2, 3, 4, 5, 6, 777, 778, 5, NULL]::bigint[]) AS unseen
FROM seen ORDER BY user_id;

\echo '== Membership, one item or many (like BF.EXISTS / BF.MEXISTS)'
SELECT bloom_contains(filter, 777) AS has_777, bloom_contains(filter, ARRAY[1, 2, 999]) AS many
FROM seen WHERE user_id = 1;

\echo '== A filter with 100,000 items: a split-block Bloom filter sized for 1% error'
CREATE TABLE big AS SELECT bloom_agg(g) AS filter FROM generate_series(1, 100000) g;
SELECT pg_column_size(filter) AS bytes,
       bloom_info(filter)->>'representation' AS representation,
       round((bloom_info(filter)->>'estimated_fpr')::numeric, 5) AS estimated_fpr
FROM big;
SELECT count(*) FILTER (WHERE bloom_contains(b.filter, g)) AS false_positives,
       count(*) AS fresh_ids,
       round(100.0 * count(*) FILTER (WHERE bloom_contains(b.filter, g)) / count(*), 3) AS fpr_percent
FROM big b, generate_series(1000001, 1100000) g;

\echo '== Union of filters of one shape, and the aggregate over rows'
SELECT bloom_cardinality(a.filter || b.filter) AS union_items
FROM seen a, seen b WHERE a.user_id = 2 AND b.user_id = 3;
SELECT bloom_cardinality(bloom_union_agg(filter)) AS all_users_items FROM seen;

\echo '== Fixed filters refuse items past capacity instead of breaking their error rate'
\set ON_ERROR_STOP 0
SELECT bloom_add(bloom_add(bloom_empty(1, 0.01, false), 1), 2);
\set ON_ERROR_STOP 1

\echo '== Tracking: the impressions table maintains its own per-user filters, in the same transaction'
CREATE TABLE impressions (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real DEFAULT 1);
INSERT INTO impressions (user_id, post_id, seen_at)
SELECT u, p, now() - (p % 30) * interval '1 day' FROM generate_series(1, 50) u, generate_series(1, 300) p;
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at', "where" => 'watch_pct >= 0.5') AS filter_table;
INSERT INTO impressions (user_id, post_id) VALUES (7, 1001), (7, 1002), (8, 1001);
SELECT seen_bloom.unseen('impressions', 7::bigint, ARRAY[1001, 1003, 299, 5000, 1003]::bigint[]) AS feed_for_user_7;
SELECT users, filter_rows, pg_size_pretty(total_bytes) AS size, round(bytes_per_user_mean) AS bytes_per_user,
       round(estimated_fpr_max::numeric, 5) AS fpr_max
FROM seen_bloom.stats('impressions');

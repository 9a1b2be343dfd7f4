-- bloom_union, the || operator, and the aggregates bloom_union_agg and bloom_agg.

SELECT bloom_unseen(bloom_add(NULL::bloom, ARRAY[1, 2]) || bloom_add(NULL::bloom, ARRAY[3, 4]), ARRAY[1, 2, 3, 4, 5]) AS union_unseen;
SELECT bloom_union(bloom_add(NULL::bloom, ARRAY[1, 2]), bloom_add(NULL::bloom, ARRAY[2, 3]))::bytea
     = bloom_add(NULL::bloom, ARRAY[1, 2, 3])::bytea AS union_equals_adding_both;
-- Union of split-block filters keeps every member.
WITH a AS (SELECT bloom_agg(g, 1000, 0.01) AS f FROM generate_series(1, 3000) g),
     b AS (SELECT bloom_agg(g, 1000, 0.01) AS f FROM generate_series(2001, 6000) g)
SELECT cardinality(bloom_unseen(a.f || b.f, ARRAY(SELECT generate_series(1, 6000)))) AS members_missing,
       bloom_info(a.f || b.f)->>'representation' AS representation
FROM a, b;
-- Mixed exact and split-block.
WITH a AS (SELECT bloom_agg(g, 1000, 0.01) AS f FROM generate_series(1, 3000) g)
SELECT cardinality(bloom_unseen(a.f || bloom_add(bloom_empty(1000, 0.01), ARRAY[-1, -2]), ARRAY[-1, -2, 1, 3000])) AS members_missing
FROM a;

-- Different shapes cannot be combined: 22000, naming both shapes.
SELECT bloom_empty(100) || bloom_empty(200);
\echo :SQLSTATE
SELECT bloom_union(bloom_empty(100, 0.01), bloom_empty(100, 0.001));
\echo :SQLSTATE
SELECT bloom_union(bloom_empty(100, 0.01, true), bloom_empty(100, 0.01, false));
\echo :SQLSTATE

-- bloom_union_agg skips NULLs; no rows gives NULL.
CREATE TABLE per_day (day int, f bloom);
INSERT INTO per_day SELECT d, bloom_add(NULL::bloom, ARRAY(SELECT d * 100 + g FROM generate_series(1, 10) g)) FROM generate_series(1, 5) d;
INSERT INTO per_day VALUES (6, NULL);
SELECT bloom_cardinality(bloom_union_agg(f)) AS items, bloom_contains(bloom_union_agg(f), 305) AS has_305 FROM per_day;
SELECT bloom_union_agg(f) IS NULL AS no_rows FROM per_day WHERE false;
SELECT bloom_union_agg(f) FROM (VALUES (bloom_empty(10)), (bloom_empty(20))) v(f);
\echo :SQLSTATE

-- bloom_agg for every item type; NULL items skipped; no rows gives NULL.
SELECT bloom_cardinality(bloom_agg(g)) AS bigints FROM generate_series(1, 1000) g;
SELECT bloom_cardinality(bloom_agg(g::int)) AS ints FROM generate_series(1, 10) g;
SELECT bloom_cardinality(bloom_agg(g::text)) AS texts FROM generate_series(1, 10) g;
SELECT bloom_cardinality(bloom_agg(decode(lpad(g::text, 2, '0'), 'hex'))) AS byteas FROM generate_series(1, 10) g;
SELECT bloom_cardinality(bloom_agg(('00000000-0000-0000-0000-0000000000' || lpad(g::text, 2, '0'))::uuid)) AS uuids FROM generate_series(1, 10) g;
SELECT bloom_cardinality(bloom_agg(x)) AS nulls_skipped FROM (VALUES (1), (NULL), (2), (NULL)) v(x);
SELECT bloom_agg(g) IS NULL AS no_rows FROM generate_series(1, 10) g WHERE false;
-- The aggregate equals adding the same items one by one (it is exact here).
SELECT (SELECT bloom_agg(g) FROM generate_series(1, 100) g)::bytea
     = bloom_add(NULL::bloom, ARRAY(SELECT generate_series(1, 100)))::bytea AS agg_equals_add;
-- With an explicit shape.
SELECT bloom_info(bloom_agg(g, 500, 0.001)) - 'layer_details' - 'fill_ratio' - 'estimated_fpr' - 'bytes' AS shaped
FROM generate_series(1, 2000) g;
SELECT bloom_agg(g, 0, 0.01) FROM generate_series(1, 10) g;
\echo :SQLSTATE
-- Grouped, as a per-user rebuild would do.
SELECT u, bloom_cardinality(bloom_agg(item)) AS items
FROM (VALUES (1, 10), (1, 11), (2, 10), (1, 10)) v(u, item) GROUP BY u ORDER BY u;

-- bloom_contains (one item, many items) and bloom_unseen, the feed filter.

CREATE TABLE f AS SELECT bloom_add(NULL::bloom, ARRAY[1, 2, 3, 5, 8]::bigint[]) AS f,
                         (SELECT bloom_agg(g) FROM generate_series(1, 20000) g) AS big;

SELECT bloom_contains(f, 3) AS three, bloom_contains(f, 4) AS four FROM f;
SELECT bloom_contains(f, ARRAY[1, 4, NULL, 8]) AS answers FROM f;
SELECT bloom_contains(f, ARRAY[]::bigint[]) AS empty FROM f;
SELECT bloom_contains(f, NULL::bigint) IS NULL AS strict_on_null_item FROM f;
SELECT bloom_contains(NULL::bloom, 1) IS NULL AS strict_on_null_filter;
SELECT bloom_contains(big, ARRAY[1, 20000]) AS big_answers FROM f;

-- bloom_unseen keeps candidates in order, drops seen ones, repeats (first kept) and NULLs.
SELECT bloom_unseen(f, ARRAY[9, 1, 4, NULL, 4, 7, 3, 9, 6]) AS unseen FROM f;
SELECT bloom_unseen(NULL::bloom, ARRAY[9, 1, 9, NULL, 2]) AS nothing_seen;
SELECT bloom_unseen(f, NULL::int[]) IS NULL AS null_candidates FROM f;
SELECT bloom_unseen(f, ARRAY[]::bigint[]) AS no_candidates FROM f;
SELECT bloom_unseen(f, ARRAY[NULL, NULL]::bigint[]) AS only_nulls FROM f;
SELECT pg_typeof(bloom_unseen(f, ARRAY[1, 2]::int[])) AS keeps_int4,
       pg_typeof(bloom_unseen(f, ARRAY[1, 2]::smallint[])) AS keeps_int2,
       pg_typeof(bloom_unseen(NULL::bloom, ARRAY['x']::text[])) AS keeps_text FROM f;
SELECT bloom_unseen(f, ARRAY[5, 6, 7]::smallint[]) AS int2_candidates FROM f;
SELECT bloom_unseen(bloom_add(NULL::bloom, ARRAY['a', 'b']), ARRAY['b', 'c', 'a', 'd', 'c']::text[]) AS text_candidates;
SELECT bloom_unseen(bloom_add(NULL::bloom, ARRAY['a']::varchar[]), ARRAY['a', 'z']::varchar[]) AS varchar_candidates;
SELECT bloom_unseen(bloom_add(NULL::bloom, '00000000-0000-0000-0000-000000000001'::uuid),
                    ARRAY['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002']::uuid[]) AS uuid_candidates;
SELECT bloom_unseen(bloom_add(NULL::bloom, '\xff'::bytea), ARRAY['\xff', '\x00']::bytea[]) AS bytea_candidates;
-- Against a big split-block filter: everything in 1..20000 is seen.
SELECT bloom_unseen(big, ARRAY[19999, 20000, 20001, 0, -1]) AS big_unseen FROM f;
-- Over-fetch 1,000 candidates, half of them seen.
SELECT cardinality(bloom_unseen(big, ARRAY(SELECT g FROM generate_series(19501, 20500) g))) BETWEEN 490 AND 500 AS about_half FROM f;
-- No false negatives: every added item is reported seen.
SELECT cardinality(bloom_unseen(big, ARRAY(SELECT g FROM generate_series(1, 20000) g))) AS seen_items_left FROM f;

-- The per-row form gives the same answers as the array filter.
CREATE TABLE candidates AS SELECT g AS id FROM generate_series(19901, 20100) g;
SELECT count(*) AS per_row_unseen FROM f, candidates c WHERE NOT bloom_contains(f.big, c.id);
SELECT cardinality(bloom_unseen(big, (SELECT array_agg(id) FROM candidates))) AS array_unseen FROM f;

-- Errors: unsupported element types (42804), multi-dimensional arrays (22023).
SELECT bloom_contains(f, ARRAY[1.5]) FROM f;
\echo :SQLSTATE
SELECT bloom_unseen(f, ARRAY[now()]) FROM f;
\echo :SQLSTATE
SELECT bloom_unseen(f, ARRAY[[1, 2], [3, 4]]) FROM f;
\echo :SQLSTATE
SELECT bloom_contains(f, ARRAY[[1], [2]]) FROM f;
\echo :SQLSTATE

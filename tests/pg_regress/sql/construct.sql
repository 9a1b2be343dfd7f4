-- bloom_empty, the default-shape GUCs, and bloom_add for every item type.

-- The GUCs exist once the library is loaded (any seen_bloom call does it, or LOAD).
LOAD 'seen_bloom';
SHOW seen_bloom.default_capacity;
SHOW seen_bloom.default_error_rate;
SELECT bloom_info(bloom_empty()) - 'layer_details' AS default_filter;
SELECT bloom_info(bloom_empty(5000, 0.001, false)) ->> 'capacity' AS capacity,
       bloom_info(bloom_empty(5000, 0.001, false)) ->> 'error_rate' AS error_rate,
       bloom_info(bloom_empty(5000, 0.001, false)) ->> 'scaling' AS scaling;

-- The GUCs shape filters made without arguments.
SET seen_bloom.default_capacity = 2000;
SET seen_bloom.default_error_rate = 0.05;
SELECT bloom_info(bloom_empty())->>'capacity' AS capacity, bloom_info(bloom_empty())->>'error_rate' AS error_rate,
       bloom_info(bloom_add(NULL::bloom, 1))->>'capacity' AS capacity_of_add_to_null;
RESET seen_bloom.default_capacity;
RESET seen_bloom.default_error_rate;
SET seen_bloom.default_capacity = 0;
\echo :SQLSTATE
SET seen_bloom.default_error_rate = 1;
\echo :SQLSTATE

-- Bad parameters: 22023, naming the allowed range.
SELECT bloom_empty(0);
\echo :SQLSTATE
SELECT bloom_empty(-5);
\echo :SQLSTATE
SELECT bloom_empty(1000000001);
\echo :SQLSTATE
SELECT bloom_empty(100, 0);
\echo :SQLSTATE
SELECT bloom_empty(100, 1);
\echo :SQLSTATE
SELECT bloom_empty(100, -0.5);
\echo :SQLSTATE
SELECT bloom_empty(100, 'NaN');
\echo :SQLSTATE
SELECT bloom_empty(100, 'Infinity');
\echo :SQLSTATE
-- A shape whose filter would pass the 1 GB varlena limit: 54000.
SELECT bloom_empty(1000000000, 0.0000001);
\echo :SQLSTATE

-- A NULL filter starts a default one; a NULL item changes nothing.
SELECT bloom_cardinality(bloom_add(NULL::bloom, 42)) AS one_item;
SELECT bloom_add(NULL::bloom, NULL::bigint) IS NULL AS null_stays_null;
SELECT bloom_add(bloom_add(NULL::bloom, 1), NULL::text)::bytea = bloom_add(NULL::bloom, 1)::bytea AS null_item_is_no_op;
SELECT bloom_add(bloom_empty(), NULL::bigint[])::bytea = bloom_empty()::bytea AS null_array_is_no_op;

-- The upsert pattern needs no set-up.
CREATE TABLE seen (user_id bigint PRIMARY KEY, f bloom);
INSERT INTO seen VALUES (1, bloom_add(NULL::bloom, 10)) ON CONFLICT (user_id) DO UPDATE SET f = bloom_add(seen.f, 10);
INSERT INTO seen VALUES (1, bloom_add(NULL::bloom, 11)) ON CONFLICT (user_id) DO UPDATE SET f = bloom_add(seen.f, 11);
SELECT bloom_cardinality(f), bloom_contains(f, 10) AND bloom_contains(f, 11) AS both FROM seen;

-- Integers hash as the equal bigint, whatever their width.
SELECT bloom_contains(bloom_add(NULL::bloom, 42::smallint), 42::bigint) AS int2_is_int8,
       bloom_contains(bloom_add(NULL::bloom, 42::int), 42::bigint) AS int4_is_int8,
       bloom_contains(bloom_add(NULL::bloom, ARRAY[42]::int[]), 42::smallint) AS int4_array_is_int8;
-- text, bytea and uuid items.
SELECT bloom_contains(bloom_add(NULL::bloom, 'post:1'::text), 'post:1'::text) AS text_item,
       bloom_contains(bloom_add(NULL::bloom, 'post:1'::text), 'post:2'::text) AS other_text,
       bloom_contains(bloom_add(NULL::bloom, '\x0102'::bytea), '\x0102'::bytea) AS bytea_item,
       bloom_contains(bloom_add(NULL::bloom, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid), 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid_item;
-- text and bytea with the same bytes are one item (docs/FORMAT.md).
SELECT bloom_contains(bloom_add(NULL::bloom, 'abc'::text), 'abc'::bytea) AS text_bytes_equal_bytea;
-- Adding the same item twice counts once.
SELECT bloom_cardinality(bloom_add(NULL::bloom, ARRAY[1, 1, 2, NULL, 2, 3]::bigint[])) AS three;
SELECT bloom_cardinality(bloom_add(NULL::bloom, ARRAY['a', 'b', 'a']::varchar[])) AS two;
SELECT bloom_cardinality(bloom_add(NULL::bloom, ARRAY[]::bigint[])) AS zero;

-- Fixed filters refuse a new item past capacity (54000); a repeat is fine.
SELECT bloom_cardinality(bloom_add(bloom_empty(3, 0.01, false), ARRAY[1, 2, 3, 3, 2, 1]::bigint[])) AS full_but_fine;
SELECT bloom_add(bloom_empty(3, 0.01, false), ARRAY[1, 2, 3, 4]::bigint[]);
\echo :SQLSTATE
-- Scaling filters grow instead.
SELECT bloom_cardinality(f) AS items, (bloom_info(f)->>'layers')::int > 1 AS scaled
FROM (SELECT bloom_add(bloom_empty(100, 0.01), array_agg(g)) AS f FROM generate_series(1, 1000) g) s;

-- Unsupported item types: 42804; multi-dimensional arrays: 22023.
SELECT bloom_add(NULL::bloom, ARRAY[1.5]::numeric[]);
\echo :SQLSTATE
SELECT bloom_add(NULL::bloom, ARRAY[[1, 2], [3, 4]]::bigint[]);
\echo :SQLSTATE

-- bloom_cardinality, bloom_info, and what filters cost in bytes.

SELECT bloom_cardinality(bloom_empty()) AS empty,
       bloom_cardinality(bloom_add(NULL::bloom, ARRAY[1, 2, 3])) AS three;
SELECT bloom_info(bloom_add(NULL::bloom, ARRAY[1, 2, 3])) AS exact_info;
SELECT jsonb_object_keys(bloom_info(bloom_empty())) AS info_keys ORDER BY 1;

-- A split-block filter: its layers, fill and estimated false-positive rate.
CREATE TABLE sized AS
SELECT (SELECT bloom_agg(g) FROM generate_series(1, 200) g) AS f200,
       bloom_add(bloom_empty(100000, 0.01, false), ARRAY(SELECT generate_series(1, 100000))) AS fixed100k,
       bloom_add(bloom_empty(100000, 0.01, true), ARRAY(SELECT generate_series(1, 100000))) AS scaling100k,
       bloom_add(bloom_empty(100000, 0.01, true), ARRAY(SELECT generate_series(1, 400000))) AS scaling400k;
SELECT bloom_cardinality(fixed100k) AS items,
       bloom_info(fixed100k)->>'representation' AS representation,
       bloom_info(fixed100k)->>'layers' AS layers,
       (bloom_info(fixed100k)->>'fill_ratio')::float8 BETWEEN 0.45 AND 0.6 AS fill_about_half,
       (bloom_info(fixed100k)->>'estimated_fpr')::float8 BETWEEN 0.005 AND 0.011 AS fpr_near_target
FROM sized;
SELECT bloom_info(scaling400k)->>'layers' AS layers,
       (bloom_info(scaling400k)->>'estimated_fpr')::float8 < 0.01 AS fpr_under_target,
       bloom_cardinality(scaling400k) BETWEEN 396000 AND 400000 AS items_counted
FROM sized;
SELECT l->>'capacity' AS capacity, l->>'error_rate' AS error_rate, l->>'blocks' AS blocks
FROM sized, jsonb_array_elements(bloom_info(scaling400k)->'layer_details') l;

-- Storage targets: 200 items <= 1,700 bytes; 100,000 items at 1% <= 135,000 (fixed)
-- and <= 150,000 (scaling). RedisBloom's scaling filter of that size: 137,944 bytes.
SELECT pg_column_size(f200) AS bytes_200, pg_column_size(f200) <= 1700 AS ok_200,
       pg_column_size(fixed100k) AS bytes_fixed, pg_column_size(fixed100k) <= 135000 AS ok_fixed,
       pg_column_size(scaling100k) AS bytes_scaling, pg_column_size(scaling100k) <= 150000 AS ok_scaling
FROM sized;

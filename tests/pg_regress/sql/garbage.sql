-- A catalogue of bad calls and hostile input, each with its SQLSTATE; nothing may crash.
-- Not repeated here (already in other files): malformed text basics, a bad magic, version,
-- hash and flags, unordered hashes, a forged top-byte item count, capacity 0 and a short
-- COPY BINARY value (type_io.sql); bad bloom_empty parameters, GUCs, NULL filter / item /
-- array for bloom_add, numeric[] and 2-D arrays for bloom_add (construct.sql); NULLs, empty
-- arrays and 2-D / wrong-typed arrays for bloom_contains / bloom_unseen (membership.sql);
-- track twice, missing table / column, wrong types, a where with a second statement in
-- parentheses, untrack twice, calls on an untracked table (tracking.sql).

CREATE TABLE g (id int PRIMARY KEY, f bloom);
INSERT INTO g VALUES
    (1, bloom_add(bloom_empty(100, 0.01), ARRAY[1, 2, 3]::bigint[])),           -- exact
    (2, bloom_add(bloom_empty(20, 0.05, false), ARRAY(SELECT generate_series(1, 20)::bigint))), -- split-block, fixed
    (3, bloom_add(bloom_empty(10, 0.1), ARRAY(SELECT generate_series(1, 80)::bigint)));        -- split-block, 3 layers
SELECT id, bloom_info(f)->>'representation' AS representation, bloom_info(f)->>'layers' AS layers,
       length(f::bytea) AS bytes FROM g ORDER BY id;

-- NULL to every function. Strict functions give NULL; the rest say what NULL means.
SELECT bloom_info(bloom_empty(NULL, NULL, NULL))->>'scaling' AS null_scaling_means_scaling,
       bloom_info(bloom_empty(NULL, NULL))->>'capacity' AS null_capacity_means_default;
SELECT bloom_union(NULL, f) IS NULL AS union_left, bloom_union(f, NULL) IS NULL AS union_right,
       (f || NULL::bloom) IS NULL AS concat_null, bloom_cardinality(NULL) IS NULL AS cardinality,
       bloom_info(NULL) IS NULL AS info, bloom_contains(NULL::bloom, ARRAY[1]) IS NULL AS contains_array,
       bloom_unseen(NULL::bloom, NULL::bigint[]) IS NULL AS unseen_both
FROM g WHERE id = 1;
SELECT (NULL::text)::bloom IS NULL AS text_cast, (NULL::bytea)::bloom IS NULL AS bytea_cast,
       (NULL::bloom)::bytea IS NULL AS to_bytea, bloom_add(NULL::bloom, NULL::bigint[]) IS NULL AS add_null_array;
SELECT bloom_cardinality(bloom_agg(x)) AS agg_of_only_nulls_is_empty, bloom_union_agg(NULL::bloom) IS NULL AS union_agg_of_null
FROM (VALUES (NULL::bigint), (NULL)) v(x);
SELECT bloom_cardinality(bloom_agg(x, NULL, NULL)) AS agg_null_shape_takes_defaults FROM (VALUES (1::bigint), (2)) v(x);
SELECT seen_bloom.item_hash(NULL::bigint) IS NULL AS item_hash, seen_bloom.generation_of(NULL, 3600) IS NULL AS generation_of,
       seen_bloom.unseen(NULL, 1::bigint, ARRAY[1]) IS NULL AS unseen_null_table,
       seen_bloom.has_seen(NULL, 1::bigint, 1) IS NULL AS has_seen_null_table;
SELECT seen_bloom.track(NULL, 'u', 'i');
\echo :SQLSTATE
SELECT seen_bloom.track('g', NULL, 'i');
\echo :SQLSTATE
SELECT seen_bloom.untrack(NULL);
\echo :SQLSTATE
SELECT seen_bloom.stats(NULL);
\echo :SQLSTATE
SELECT seen_bloom.filter(NULL, 1::bigint);
\echo :SQLSTATE
CALL seen_bloom.rebuild(NULL);
\echo :SQLSTATE
-- The aggregates' internal-state functions cannot be called from SQL at all.
SELECT bloom_agg_final(NULL::internal);
\echo :SQLSTATE

-- Empty arrays and arrays of NULLs, of every accepted element type, and odd bounds.
SELECT bloom_add(f, '{}'::text[])::bytea = f::bytea AS add_empty_text,
       bloom_add(f, ARRAY[NULL, NULL]::uuid[])::bytea = f::bytea AS add_null_uuids,
       bloom_contains(f, ARRAY[NULL]::bytea[]) AS contains_null_bytea,
       bloom_unseen(f, '{}'::int[]) AS unseen_empty_int,
       bloom_unseen(f, ARRAY[NULL]::text[]) AS unseen_null_text
FROM g WHERE id = 1;
SELECT bloom_unseen(f, '[0:4]={1,5,NULL,5,6}'::bigint[]) AS zero_based_candidates,
       array_lower(bloom_unseen(f, '[0:4]={1,5,NULL,5,6}'::bigint[]), 1) AS result_lower_bound,
       bloom_contains(f, '[-2:0]={3,4,1}'::int[]) AS negative_bounds
FROM g WHERE id = 1;

-- Every candidate unseen: the result is the candidates, one-based whatever their bounds.
SELECT bloom_unseen(f, '[0:2]={5,6,7}'::bigint[]) AS all_unseen_zero_based,
       array_lower(bloom_unseen(f, '[0:2]={5,6,7}'::bigint[]), 1) AS its_lower_bound,
       bloom_unseen(f, '{5,6,7}'::bigint[]) AS all_unseen,
       array_lower(bloom_unseen(f, '{5,6,7}'::bigint[]), 1) AS lower_bound
FROM g WHERE id = 1;

-- Multi-dimensional arrays (22023), including 3-D and an empty 2-D literal.
SELECT bloom_unseen(f, ARRAY[[[1]], [[2]]]::bigint[]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_add(f, ARRAY[['a', 'b']]::text[]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT seen_bloom.unseen('g', 1::bigint, ARRAY[[1, 2]]);
\echo :SQLSTATE

-- Wrong element types: 42804 for arrays and anyelement, 42883 where no overload matches.
SELECT bloom_add(f, ARRAY[true]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_contains(f, ARRAY[1.5::float8]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_unseen(f, ARRAY['{"a":1}'::jsonb]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_unseen(f, ARRAY[f]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_add(f, ARRAY[int4range(1, 2)]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_add(f, ARRAY[ROW(1, 2)]) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_unseen(f, '{1,2}') FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_add(f, 1.5) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_contains(f, now()) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_info(bloom_add(NULL::bloom, 'x'::char(3)))->>'item_family' AS bpchar_goes_as_text;
SELECT bloom_union(f, 1) FROM g WHERE id = 1;
\echo :SQLSTATE
SELECT bloom_agg(x) FROM (VALUES (1.5)) v(x);
\echo :SQLSTATE

-- Arrays of 1,000,000 elements work, within a memory bound (checked at the end).
CREATE TABLE million AS SELECT array_agg(g::bigint) AS a, array_agg((g + 1000000)::bigint) AS fresh
FROM generate_series(1, 1000000) g;
CREATE TABLE mf AS SELECT bloom_add(NULL::bloom, a) AS f FROM million;
SELECT bloom_cardinality(f) BETWEEN 980000 AND 1000000 AS cardinality_near_1m, pg_column_size(f) < 4000000 AS under_4_mb
FROM mf;
SELECT cardinality(bloom_unseen(f, a)) AS unseen_of_added,
       (SELECT count(*) FROM unnest(bloom_contains(f, a)) x WHERE x) AS contained_of_added,
       cardinality(bloom_unseen(f, fresh)) BETWEEN 980000 AND 1000000 AS fresh_mostly_unseen
FROM mf, million;
SELECT cardinality(bloom_unseen(NULL::bloom, a || a)) AS two_million_with_repeats,
       cardinality(bloom_unseen(NULL::bloom, array_fill(NULL::bigint, ARRAY[1000000]))) AS million_nulls,
       bloom_cardinality(bloom_add(NULL::bloom, array_fill(7::bigint, ARRAY[1000000]))) AS million_repeats
FROM million;
-- A fixed filter refuses a million items clearly.
SELECT bloom_add(bloom_empty(1000, 0.01, false), a) FROM million;
\echo :SQLSTATE
-- No single layer passes 256 MiB (54000, before anything is allocated): a small shape with a
-- tiny error rate, or a large capacity, whose first layer would be hundreds of MB is refused
-- when created (it used to be allocated by the add that filled the exact form); shapes whose
-- first layer stays under the limit are accepted.
SELECT bloom_empty(4, 5e-19::float8);
\echo :SQLSTATE
SELECT bloom_empty(300000000, 0.01);
\echo :SQLSTATE
SELECT bloom_info(bloom_empty(4, 1e-18::float8))->>'capacity' AS tiny_rate_accepted,
       bloom_cardinality(bloom_add(bloom_empty(100000000, 0.01), 1::bigint)) AS large_shape_accepted;

-- Text input garbage beyond type_io.sql: 22P02 each.
SELECT ' \x53424c4d'::bloom;
\echo :SQLSTATE
SELECT '\\x53424c4d'::bloom;
\echo :SQLSTATE
SELECT '\x53 42'::bloom;
\echo :SQLSTATE
SELECT ('\x' || repeat('ab', 500000))::bloom;
\echo :SQLSTATE
SELECT ('\x' || repeat('0', 1000001))::bloom;
\echo :SQLSTATE
SELECT ('\x' || repeat('zz', 100))::bloom;
\echo :SQLSTATE

-- Forged sizes: a valid value with one header field edited to claim a huge size, through
-- the text form, the bytea cast and COPY BINARY. Each is refused (22P02) by comparing the
-- claim with the bytes there, before any allocation. Offsets (docs/FORMAT.md): layers at 12,
-- capacity 16, items 32; the first layer header at 40: capacity 40, items 56, blocks 64.
CREATE TABLE forged (what text, b bytea);
INSERT INTO forged
SELECT 'exact items 2^40', overlay(f::bytea placing '\x0000000000010000'::bytea from 33 for 8) FROM g WHERE id = 1
UNION ALL SELECT 'exact items 2^63-1', overlay(f::bytea placing '\xffffffffffffff7f'::bytea from 33 for 8) FROM g WHERE id = 1
UNION ALL SELECT 'capacity 2^40', overlay(f::bytea placing '\x0000000000010000'::bytea from 17 for 8) FROM g WHERE id = 1
UNION ALL SELECT 'capacity 2^64-1', overlay(f::bytea placing '\xffffffffffffffff'::bytea from 17 for 8) FROM g WHERE id = 3
UNION ALL SELECT 'layers 2^32-1', overlay(f::bytea placing '\xffffffff'::bytea from 13 for 4) FROM g WHERE id = 3
UNION ALL SELECT 'layers 65', overlay(f::bytea placing '\x41000000'::bytea from 13 for 4) FROM g WHERE id = 3
UNION ALL SELECT 'layers 5 of 4', overlay(f::bytea placing '\x05000000'::bytea from 13 for 4) FROM g WHERE id = 3
UNION ALL SELECT 'layer blocks 2^40', overlay(f::bytea placing '\x0000000000010000'::bytea from 65 for 8) FROM g WHERE id = 3
UNION ALL SELECT 'layer blocks 2^32', overlay(f::bytea placing '\x0000000001000000'::bytea from 65 for 8) FROM g WHERE id = 2
UNION ALL SELECT 'layer blocks 2^64-1', overlay(f::bytea placing '\xffffffffffffffff'::bytea from 65 for 8) FROM g WHERE id = 2
UNION ALL SELECT 'layer items 2^40', overlay(f::bytea placing '\x0000000000010000'::bytea from 57 for 8) FROM g WHERE id = 2
UNION ALL SELECT 'layer capacity 0', overlay(f::bytea placing '\x0000000000000000'::bytea from 41 for 8) FROM g WHERE id = 2
UNION ALL SELECT 'layer error rate NaN', overlay(f::bytea placing '\x000000000000f87f'::bytea from 49 for 8) FROM g WHERE id = 2
UNION ALL SELECT 'split body cut by one block', substr(f::bytea, 1, length(f::bytea) - 32) FROM g WHERE id = 3
UNION ALL SELECT 'header only, exact with 3 items', substr(f::bytea, 1, 40) FROM g WHERE id = 1
UNION ALL SELECT 'representation 3', set_byte(f::bytea, 6, 3) FROM g WHERE id = 1
UNION ALL SELECT 'exact with 1 layer', overlay(f::bytea placing '\x01000000'::bytea from 13 for 4) FROM g WHERE id = 1;
SELECT count(*) AS forged_values FROM forged;
-- Each way in, one value at a time: the error, and its SQLSTATE.
CREATE FUNCTION try_forged(way text) RETURNS TABLE (what text, state text, message text) LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM forged ORDER BY 1 LOOP
        what := r.what;
        BEGIN
            IF way = 'text' THEN
                PERFORM ('\x' || encode(r.b, 'hex'))::bloom;
            ELSE
                PERFORM r.b::bloom;
            END IF;
            state := 'accepted';
            message := NULL;
        EXCEPTION WHEN OTHERS THEN
            state := SQLSTATE;
            message := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END $$;
SELECT * FROM try_forged('text');
SELECT t.what, t.state = c.state AND t.message = c.message AS bytea_cast_same_error
FROM try_forged('text') t JOIN try_forged('bytea') c USING (what) ORDER BY 1;
-- COPY BINARY: the bytea column's binary form is the raw bytes bloom_recv receives; each
-- forged value alone, so each must fail (22P02) and leave nothing behind.
CREATE TABLE landing (f bloom);
CREATE FUNCTION copy_forged() RETURNS TABLE (what text, state text) LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM forged ORDER BY 1 LOOP
        what := r.what;
        EXECUTE format('COPY (SELECT b FROM forged WHERE what = %L) TO %L (FORMAT binary)', r.what, '/tmp/seen_bloom_regress_garbage.bin');
        BEGIN
            COPY landing FROM '/tmp/seen_bloom_regress_garbage.bin' (FORMAT binary);
            state := 'accepted';
        EXCEPTION WHEN OTHERS THEN
            state := SQLSTATE;
        END;
        RETURN NEXT;
    END LOOP;
END $$;
SELECT state, count(*) AS forged_values FROM copy_forged() GROUP BY 1;
SELECT count(*) AS rows_landed FROM landing;
-- The valid originals land through the same COPY.
COPY (SELECT f::bytea FROM g ORDER BY id) TO '/tmp/seen_bloom_regress_garbage.bin' (FORMAT binary);
COPY landing FROM '/tmp/seen_bloom_regress_garbage.bin' (FORMAT binary);
SELECT count(*) AS valid_rows_landed, bool_and(l.f::text = (l.f::text)::bloom::text) AS text_round_trip
FROM landing l;

-- Tracking: objects that are not plain tables, odd arguments, and a huge single batch.
CREATE VIEW g_view AS SELECT 1::bigint AS u, 2::bigint AS i;
SELECT seen_bloom.track('g_view', 'u', 'i');
\echo :SQLSTATE
CREATE SEQUENCE g_seq;
SELECT seen_bloom.track('g_seq', 'last_value', 'log_cnt');
\echo :SQLSTATE
SELECT seen_bloom.track('pg_class', 'oid', 'relname');
\echo :SQLSTATE
SELECT seen_bloom.track('g; DROP TABLE g', 'u', 'i');
\echo :SQLSTATE
SELECT seen_bloom.track(0::oid::regclass, 'u', 'i');
\echo :SQLSTATE
CREATE TABLE imp (u bigint, i bigint, at timestamptz DEFAULT now(), score int);
SELECT seen_bloom.track('imp', 'u', 'i', 'at', "window" => NULL);
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', 'at', capacity => 0);
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', 'at', error_rate => 'NaN');
\echo :SQLSTATE
-- `where` predicates that try to run a second statement or hide one in a comment: 42601.
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'true; DROP TABLE g');
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'true) OR (true --');
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'true /*');
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => $w$true $$; DROP TABLE g; $$$w$);
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => '');
\echo :SQLSTATE
-- Not boolean, aggregates, set-returning functions, a subquery over a missing table, and an
-- unqualified function outside pg_catalog: each refused when tracking starts.
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'score');
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'count(*) > 0');
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'generate_series(1, 2) > 0');
\echo :SQLSTATE
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'i NOT IN (SELECT id FROM blocked)');
\echo :SQLSTATE
CREATE FUNCTION public.keep(bigint) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 % 2 = 0';
SELECT seen_bloom.track('imp', 'u', 'i', "where" => 'keep(i)');
\echo :SQLSTATE
SELECT count(*) AS g_still_there FROM g;
SELECT count(*) AS nothing_tracked_by_failures FROM seen_bloom.tracked;
-- A schema-qualified function and a subquery are fine.
CREATE TABLE blocked (id bigint);
INSERT INTO blocked VALUES (4);
SELECT seen_bloom.track('imp', 'u', 'i', 'at', "where" => 'public.keep(i) AND i NOT IN (SELECT id FROM public.blocked)') AS filter_table;
INSERT INTO imp (u, i) VALUES (1, 2), (1, 3), (1, 4), (1, 6);
SELECT seen_bloom.unseen('imp', 1::bigint, ARRAY[2, 3, 4, 6, 8]::bigint[]) AS unseen_by_predicate;
-- Times that are not finite do not fail the insert: -infinity is older than any window and
-- +infinity fits no generation, so both are skipped (not folded), by the generated SQL trigger
-- (a where predicate), by rebuild, and by the C trigger (no predicate).
INSERT INTO imp (u, i, at) VALUES (2, 2, now()), (2, 6, 'infinity'), (2, 8, '-infinity');
\echo :SQLSTATE
SELECT count(*) AS rows_of_user_2 FROM imp WHERE u = 2;
SELECT seen_bloom.unseen('imp', 2::bigint, ARRAY[2, 6, 8]::bigint[]) AS infinite_times_unseen;
CALL seen_bloom.rebuild('imp', 2::bigint);
SELECT seen_bloom.unseen('imp', 2::bigint, ARRAY[2, 6, 8]::bigint[]) AS after_rebuild;
CREATE TABLE imp_c (u bigint, i bigint, at timestamptz);
SELECT seen_bloom.track('imp_c', 'u', 'i', 'at') AS filter_table;
INSERT INTO imp_c VALUES (2, 2, now()), (2, 6, 'infinity'), (2, 8, '-infinity');
\echo :SQLSTATE
SELECT seen_bloom.unseen('imp_c', 2::bigint, ARRAY[2, 6, 8]::bigint[]) AS c_trigger_infinite_times_unseen;
CALL seen_bloom.rebuild('imp_c');
SELECT seen_bloom.unseen('imp_c', 2::bigint, ARRAY[2, 6, 8]::bigint[]) AS after_rebuild_c;
SELECT seen_bloom.untrack('imp_c');
TRUNCATE imp_c;
-- With one-second generations (a 5-second window) a time past 2038 would need a generation
-- past int4: skipped the same way by both triggers, nothing folded.
SELECT seen_bloom.track('imp_c', 'u', 'i', 'at', "window" => '5 seconds') AS filter_table;
INSERT INTO imp_c VALUES (3, 1, '2040-01-01 00:00:00+00');
\echo :SQLSTATE
SELECT count(*) AS folded_2040_c FROM imp_c_seen;
SELECT seen_bloom.untrack('imp_c');
SELECT seen_bloom.track('imp_c', 'u', 'i', 'at', "window" => '5 seconds', "where" => 'true') AS filter_table;
INSERT INTO imp_c VALUES (3, 1, '2040-01-01 00:00:00+00');
\echo :SQLSTATE
SELECT count(*) AS folded_2040_sql FROM imp_c_seen;
SELECT seen_bloom.untrack('imp_c');
DROP TABLE imp_c;
-- A row forged by hand at a high layer (layer 12 of the default layout is ~47 GB in all; such
-- a row used to make has_seen abort the backend): the read path and the fold hold only the
-- segments stored, and answer.
CREATE TABLE imp_f (u bigint, i bigint);
SELECT seen_bloom.track('imp_f', 'u', 'i') AS filter_table;
INSERT INTO imp_f_seen
SELECT 5, seen_bloom.generation_of(now(), generation_seconds), 12, 0, decode(repeat('00', 1536), 'hex')
FROM seen_bloom.tracked WHERE impressions = 'imp_f'::regclass;
SELECT seen_bloom.has_seen('imp_f', 5::bigint, 1) AS forged_row_read,
       seen_bloom.unseen('imp_f', 5::bigint, ARRAY[1, 2]::bigint[]) AS unseen_with_forged_row;
INSERT INTO imp_f VALUES (5, 1), (5, 2);
SELECT seen_bloom.unseen('imp_f', 5::bigint, ARRAY[1, 2, 3]::bigint[]) AS after_fold_over_forged_row,
       (SELECT count(*) FROM imp_f_seen WHERE layer = 12) AS layer_12_rows;
SELECT seen_bloom.untrack('imp_f');
DROP TABLE imp_f;
-- Many distinct users in one transaction (once 53200 "out of shared memory" with the default
-- max_locks_per_transaction: one advisory lock per user): one INSERT of 100,000 users through
-- the C trigger; tracking a table of 30,000 users (the backfill is one transaction); one
-- INSERT of 30,000 users through the SQL trigger; rebuild. Past 256 users a batch locks the
-- filter table instead. Every impression is seen after each.
SHOW max_locks_per_transaction;
CREATE TABLE imp_many (u bigint, i bigint);
SELECT seen_bloom.track('imp_many', 'u', 'i') AS filter_table;
INSERT INTO imp_many SELECT g, g * 7 FROM generate_series(1, 100000) g;
\echo :SQLSTATE
SELECT count(*) AS impressions,
       count(*) FILTER (WHERE NOT seen_bloom.has_seen('imp_many', u, i)) AS missed,
       count(*) FILTER (WHERE seen_bloom.has_seen('imp_many', u, i + 1)) < 1000 AS fresh_mostly_unseen
FROM imp_many;
SELECT seen_bloom.untrack('imp_many');
DELETE FROM imp_many WHERE u > 30000;
SELECT seen_bloom.track('imp_many', 'u', 'i', "where" => 'i > 0') AS filter_table;
SELECT count(*) FILTER (WHERE NOT seen_bloom.has_seen('imp_many', u, i)) AS missed_after_backfill_of_30000_users
FROM imp_many;
INSERT INTO imp_many SELECT g, g * 11 FROM generate_series(1, 30000) g;
\echo :SQLSTATE
SELECT count(*) AS impressions,
       count(*) FILTER (WHERE NOT seen_bloom.has_seen('imp_many', u, i)) AS missed_after_sql_trigger
FROM imp_many;
CALL seen_bloom.rebuild('imp_many');
SELECT count(*) FILTER (WHERE NOT seen_bloom.has_seen('imp_many', u, i)) AS missed_after_rebuild FROM imp_many;
SELECT seen_bloom.untrack('imp_many');
DROP TABLE imp_many;
-- One statement of 1,000,000 impressions of one user.
INSERT INTO imp (u, i) SELECT 9, g * 2 + 10 FROM generate_series(1, 1000000) g;
SELECT cardinality(seen_bloom.unseen('imp', 9::bigint, ARRAY(SELECT g * 2 + 10 FROM generate_series(1, 1000000) g))) AS unseen_of_its_million,
       cardinality(seen_bloom.unseen('imp', 9::bigint, ARRAY(SELECT g * 2 + 11 FROM generate_series(1, 1000000) g))) > 990000 AS fresh_unseen_within_1_percent;
-- Untrack of something never tracked, of a view, of an OID that names nothing.
SELECT seen_bloom.untrack('g');
\echo :SQLSTATE
SELECT seen_bloom.untrack('g_view');
\echo :SQLSTATE
SELECT seen_bloom.untrack(4000000000::oid::regclass);
\echo :SQLSTATE
SELECT seen_bloom.untrack('imp') AS untracked;

-- Identifiers with quotes, semicolons and comment marks work, and never run as SQL. A
-- `where` may not hold a semicolon anywhere, even inside a string (42601).
CREATE SCHEMA "s;chema ""x""";
CREATE TABLE "s;chema ""x"""."imp""; DROP TABLE g; --" ("user"" id" bigint, "it;em" text, "at--" timestamptz DEFAULT now());
SELECT seen_bloom.track('"s;chema ""x"""."imp""; DROP TABLE g; --"', 'user" id', 'it;em', 'at--',
                        "where" => '"at--" IS NOT NULL AND $$; DROP TABLE g; --$$ IS NOT NULL');
\echo :SQLSTATE
-- (Since 0.4.0 a ; inside quotes is fine: the predicate above is tracked; untrack it.)
SELECT seen_bloom.untrack('"s;chema ""x"""."imp""; DROP TABLE g; --"') AS untracked_first;
SELECT seen_bloom.track('"s;chema ""x"""."imp""; DROP TABLE g; --"', 'user" id', 'it;em', 'at--',
                        "where" => '"at--" IS NOT NULL AND $$--$$ <> "user"" id"::text') AS filter_table;
INSERT INTO "s;chema ""x"""."imp""; DROP TABLE g; --" VALUES (1, 'a'), (1, '; DROP TABLE g; --'), (1, 'b');
SELECT seen_bloom.unseen('"s;chema ""x"""."imp""; DROP TABLE g; --"', 1::bigint, ARRAY['a', 'b', 'c', '; DROP TABLE g; --']) AS unseen;
SELECT users FROM seen_bloom.stats('"s;chema ""x"""."imp""; DROP TABLE g; --"');
SELECT bloom_cardinality(seen_bloom.filter('"s;chema ""x"""."imp""; DROP TABLE g; --"', 1::bigint)) AS filter_items;
CALL seen_bloom.rebuild('"s;chema ""x"""."imp""; DROP TABLE g; --"', 1::bigint);
SELECT seen_bloom.expire('"s;chema ""x"""."imp""; DROP TABLE g; --"') AS expired;
TRUNCATE "s;chema ""x"""."imp""; DROP TABLE g; --";
SELECT seen_bloom.untrack('"s;chema ""x"""."imp""; DROP TABLE g; --"') AS untracked;
SELECT count(*) AS g_still_there FROM g;
-- Table names long enough that the trigger functions' names (a fold function for a `where`,
-- a truncate function) would be cut to the same 63 bytes (once 42723): the functions get a
-- shortened name and a hash of the whole; with multi-byte characters too (names are cut by
-- bytes). Tracking, folding, TRUNCATE and untrack work, and untrack leaves nothing behind.
CREATE TABLE impressions_with_a_rather_long_name_that_goes_on_and_on_xyz (u bigint, i bigint);
CREATE TABLE "impressions_ééééééééééééééééééééééééééééééééééé_x" (u bigint, i bigint);
SELECT seen_bloom.track('impressions_with_a_rather_long_name_that_goes_on_and_on_xyz', 'u', 'i', "where" => 'i > 0') AS filter_table;
SELECT seen_bloom.track('"impressions_ééééééééééééééééééééééééééééééééééé_x"', 'u', 'i', "where" => 'i > 0') AS filter_table;
SELECT p.proname, octet_length(p.proname::text) AS bytes FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
WHERE g.tgrelid IN ('impressions_with_a_rather_long_name_that_goes_on_and_on_xyz'::regclass,
                    '"impressions_ééééééééééééééééééééééééééééééééééé_x"'::regclass)
  AND NOT g.tgisinternal GROUP BY p.proname ORDER BY 1;
INSERT INTO impressions_with_a_rather_long_name_that_goes_on_and_on_xyz VALUES (1, 10), (1, -10);
INSERT INTO "impressions_ééééééééééééééééééééééééééééééééééé_x" VALUES (1, 10);
SELECT seen_bloom.unseen('impressions_with_a_rather_long_name_that_goes_on_and_on_xyz', 1::bigint, ARRAY[10, -10, 11]::bigint[]) AS long_name_unseen,
       seen_bloom.unseen('"impressions_ééééééééééééééééééééééééééééééééééé_x"', 1::bigint, ARRAY[10, 11]::bigint[]) AS multibyte_name_unseen;
TRUNCATE impressions_with_a_rather_long_name_that_goes_on_and_on_xyz;
SELECT seen_bloom.unseen('impressions_with_a_rather_long_name_that_goes_on_and_on_xyz', 1::bigint, ARRAY[10]::bigint[]) AS after_truncate;
SELECT seen_bloom.untrack('impressions_with_a_rather_long_name_that_goes_on_and_on_xyz');
SELECT seen_bloom.untrack('"impressions_ééééééééééééééééééééééééééééééééééé_x"');
SELECT count(*) AS functions_left FROM pg_proc WHERE proname LIKE 'impressions\_%' AND pronamespace = 'public'::regnamespace;
DROP TABLE impressions_with_a_rather_long_name_that_goes_on_and_on_xyz, "impressions_ééééééééééééééééééééééééééééééééééé_x";
SELECT count(*) AS nothing_tracked FROM seen_bloom.tracked;

-- The session's peak memory after everything above (1M-element arrays, forged values, a
-- 1M-row batch) stays under 1 GB; Linux only.
SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s*(\d+) kB'))[1]::bigint < 1024 * 1024 AS peak_rss_under_1_gb;

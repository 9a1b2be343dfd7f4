-- Type mismatches on the read path (issue 16): every user type x every user argument type,
-- and every item family x every candidate family, through unseen, has_seen and filter. A
-- mismatch is 42804 (never a crash, never "nothing seen"); integer widths are one family.

CREATE TABLE imp_bigint (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE imp_text (user_id text, post_id integer, seen_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE imp_uuid (user_id uuid, post_id uuid, seen_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE imp_items (user_id bigint, post_id text, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('imp_bigint', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
SELECT seen_bloom.track('imp_text', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
SELECT seen_bloom.track('imp_uuid', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
SELECT seen_bloom.track('imp_items', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
INSERT INTO imp_bigint (user_id, post_id) VALUES (1, 10), (1, 11);
INSERT INTO imp_text (user_id, post_id) VALUES ('1', 10), ('1', 11);
INSERT INTO imp_uuid (user_id, post_id) VALUES ('00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-00000000000a');
INSERT INTO imp_items (user_id, post_id) VALUES (1, '10');

CREATE TEMP TABLE outcome (call text, table_name text, argument text, result text);
CREATE FUNCTION pg_temp.try(call text, table_name text, argument text, statement text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE statement INTO r;
    INSERT INTO outcome VALUES (call, table_name, argument, coalesce(r, 'NULL'));
EXCEPTION WHEN OTHERS THEN
    INSERT INTO outcome VALUES (call, table_name, argument, 'ERROR ' || SQLSTATE);
END $$;

-- Users: the tracked type answers; any other raises 42804 (bigint read as text crashed 0.3.0).
SELECT pg_temp.try(f.call, t.name, u.expr,
                   replace(replace(replace(f.template, '$T', quote_literal(t.name)), '$U', u.expr), '$C', t.candidates))
FROM (VALUES ('imp_bigint', 'ARRAY[10, 12]::bigint[]', '10'), ('imp_text', 'ARRAY[10, 12]::bigint[]', '10'),
             ('imp_uuid', 'ARRAY[''00000000-0000-0000-0000-00000000000a'', ''00000000-0000-0000-0000-00000000000b'']::uuid[]',
              '''00000000-0000-0000-0000-00000000000a''::uuid'),
             ('imp_items', 'ARRAY[''10'', ''12'']::text[]', '''10''::text')) t(name, candidates, one)
CROSS JOIN (VALUES ('1::bigint'), ('1::integer'), ('''1''::text'), ('''00000000-0000-0000-0000-000000000001''::uuid'), ('''1''::varchar')) u(expr)
CROSS JOIN (VALUES ('unseen', 'SELECT seen_bloom.unseen($T, $U, $C)::text'),
                   ('filter', 'SELECT bloom_cardinality(seen_bloom.filter($T, $U))::text')) f(call, template);
SELECT pg_temp.try('has_seen', t.name, u.expr, format('SELECT seen_bloom.has_seen(%L, %s, %s)::text', t.name, u.expr, t.one))
FROM (VALUES ('imp_bigint', '10::bigint'), ('imp_text', '10'), ('imp_uuid', '''00000000-0000-0000-0000-00000000000a''::uuid'),
             ('imp_items', '''10''::text')) t(name, one)
CROSS JOIN (VALUES ('1::bigint'), ('''1''::text'), ('''00000000-0000-0000-0000-000000000001''::uuid')) u(expr);
SELECT call, table_name, argument, result FROM outcome ORDER BY 1, 2, 3;
TRUNCATE outcome;

-- Items: candidates of the tracked family answer (integer widths alike, text and varchar and
-- bytea alike); another family raises 42804.
SELECT pg_temp.try('unseen', t.name, c.expr, format('SELECT seen_bloom.unseen(%L, %s, %s)::text', t.name, t.user_arg, c.expr))
FROM (VALUES ('imp_bigint', '1::bigint'), ('imp_text', '''1''::text'),
             ('imp_uuid', '''00000000-0000-0000-0000-000000000001''::uuid'), ('imp_items', '1::bigint')) t(name, user_arg)
CROSS JOIN (VALUES ('ARRAY[10, 12]::bigint[]'), ('ARRAY[10, 12]::integer[]'), ('ARRAY[10, 12]::smallint[]'),
                   ('ARRAY[''10'', ''12'']::text[]'), ('ARRAY[''10'', ''12'']::varchar[]'), ('ARRAY[''10''::bytea]'),
                   ('ARRAY[''00000000-0000-0000-0000-00000000000a'']::uuid[]')) c(expr);
SELECT pg_temp.try('has_seen', t.name, c.expr, format('SELECT seen_bloom.has_seen(%L, %s, %s)::text', t.name, t.user_arg, c.expr))
FROM (VALUES ('imp_bigint', '1::bigint'), ('imp_text', '''1''::text'),
             ('imp_uuid', '''00000000-0000-0000-0000-000000000001''::uuid'), ('imp_items', '1::bigint')) t(name, user_arg)
CROSS JOIN (VALUES ('10::bigint'), ('10::integer'), ('''10''::text'), ('''00000000-0000-0000-0000-00000000000a''::uuid')) c(expr);
SELECT call, table_name, argument, result FROM outcome ORDER BY 1, 2, 3;

-- The message says what to cast to.
\set VERBOSITY default
SELECT seen_bloom.unseen('imp_text', 1::bigint, ARRAY[10]::bigint[]);
\echo :SQLSTATE
SELECT seen_bloom.unseen('imp_bigint', 1::bigint, ARRAY['10']::text[]);
\echo :SQLSTATE
-- No Rust backtrace reaches the client, whatever RUST_BACKTRACE the server has (the test
-- cluster runs with RUST_BACKTRACE=1): DETAIL is absent here.
SELECT seen_bloom.unseen('imp_uuid', 1::bigint, ARRAY[10]::bigint[]);
\set VERBOSITY terse

-- NULL as the table: 22004 (unseen and has_seen answer NULL, as documented).
SELECT seen_bloom.filter(NULL, 1::bigint);
\echo :SQLSTATE
SELECT * FROM seen_bloom.stats(NULL);
\echo :SQLSTATE
SELECT seen_bloom.untrack(NULL);
\echo :SQLSTATE
CALL seen_bloom.rebuild(NULL);
\echo :SQLSTATE
CALL seen_bloom.rebuild(NULL, 1::bigint);
\echo :SQLSTATE
SELECT seen_bloom.unseen(NULL, 1::bigint, ARRAY[1]::bigint[]) IS NULL AS unseen_null, seen_bloom.has_seen(NULL, 1::bigint, 1) IS NULL AS has_seen_null;

-- An impression with a NULL time is refused (23502) by both folds, not silently dropped;
-- rows without a user or an item are still skipped (anonymous), whatever their time.
CREATE TABLE imp_nullable (user_id bigint, post_id bigint, seen_at timestamptz, kind text);
SELECT seen_bloom.track('imp_nullable', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
INSERT INTO imp_nullable VALUES (1, 1, NULL);
\echo :SQLSTATE
INSERT INTO imp_nullable VALUES (NULL, 1, NULL), (1, NULL, NULL);
SELECT count(*) AS skipped_rows_kept FROM imp_nullable;
CREATE TABLE imp_nullable_where (user_id bigint, post_id bigint, seen_at timestamptz, kind text);
SELECT seen_bloom.track('imp_nullable_where', 'user_id', 'post_id', 'seen_at', "where" => 'kind = ''view''') IS NOT NULL AS tracked;
INSERT INTO imp_nullable_where VALUES (1, 1, NULL, 'view');
\echo :SQLSTATE
INSERT INTO imp_nullable_where VALUES (1, 2, NULL, 'click');
SELECT seen_bloom.unseen('imp_nullable_where', 1::bigint, ARRAY[1, 2]::bigint[]) AS nothing_folded;
-- track() of a table holding such a row refuses too, and says which column.
CREATE TABLE imp_has_null (user_id bigint, post_id bigint, seen_at timestamptz);
INSERT INTO imp_has_null VALUES (1, 1, NULL);
SELECT seen_bloom.track('imp_has_null', 'user_id', 'post_id', 'seen_at');
\echo :SQLSTATE

-- Where predicates: quotes may hold ; and parentheses; breaking out is refused (42601).
CREATE TABLE imp_kinds (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now(), kind text);
SELECT seen_bloom.track('imp_kinds', 'user_id', 'post_id', 'seen_at', "where" => 'kind <> ''a;b)'' AND kind <> $$--$$') IS NOT NULL AS tracked;
INSERT INTO imp_kinds (user_id, post_id, kind) VALUES (1, 1, 'a;b)'), (1, 2, '--'), (1, 3, 'view');
SELECT seen_bloom.unseen('imp_kinds', 1::bigint, ARRAY[1, 2, 3]::bigint[]) AS predicate_applied;
SELECT seen_bloom.untrack('imp_kinds');
SELECT seen_bloom.track('imp_kinds', 'user_id', 'post_id', 'seen_at', "where" => 'true) OR (true');
\echo :SQLSTATE
SELECT seen_bloom.track('imp_kinds', 'user_id', 'post_id', 'seen_at', "where" => 'true --');
\echo :SQLSTATE
SELECT seen_bloom.track('imp_kinds', 'user_id', 'post_id', 'seen_at', "where" => 'kind = ''open');
\echo :SQLSTATE
SELECT seen_bloom.track('imp_kinds', 'user_id', 'post_id', 'seen_at', "where" => 'no_such_column > 0');
\echo :SQLSTATE

-- bloom has = and <> (byte equality) and hashes: DISTINCT, UNION and GROUP BY work.
CREATE TABLE filters (id int, f bloom);
INSERT INTO filters VALUES (1, bloom_add(bloom_empty(100, 0.01), 1::bigint)), (2, bloom_add(bloom_empty(100, 0.01), 1::bigint)),
                           (3, bloom_add(bloom_empty(100, 0.01), 2::bigint));
SELECT count(*) AS distinct_filters FROM (SELECT DISTINCT f FROM filters) d;
-- No ordering: an aggregate's DISTINCT sorts, and bloom values have no order.
SELECT count(DISTINCT f) FROM filters;
\echo :SQLSTATE
SELECT count(*) AS union_rows FROM (SELECT f FROM filters UNION SELECT f FROM filters) u;
SELECT count(*) AS groups FROM (SELECT f FROM filters GROUP BY f) g;
SELECT a.id, b.id FROM filters a JOIN filters b ON a.f = b.f AND a.id < b.id;
SELECT (SELECT f FROM filters WHERE id = 1) = (SELECT f FROM filters WHERE id = 2) AS same,
       (SELECT f FROM filters WHERE id = 1) <> (SELECT f FROM filters WHERE id = 3) AS differ;

-- bloom values record their item family (format version 2, docs/FORMAT.md): a parameter sent
-- untyped resolves to the text overload, and the text '5' is not the bigint 5.
PREPARE add_untyped AS SELECT bloom_add($1::bloom, $2);
PREPARE contains_untyped AS SELECT bloom_contains($1::bloom, $2);
EXECUTE add_untyped(bloom_add(NULL::bloom, 5::bigint), '6');
\echo :SQLSTATE
EXECUTE contains_untyped(bloom_add(NULL::bloom, 5::bigint), '5');
\echo :SQLSTATE
SELECT bloom_contains(bloom_add(NULL::bloom, 5::bigint), 5::int) AS same_family_int4,
       bloom_contains(bloom_add(NULL::bloom, 'a'::text), 'a'::bytea) AS text_and_bytea,
       bloom_info(bloom_add(NULL::bloom, 5::bigint))->>'item_family' AS family,
       bloom_info(bloom_empty())->>'item_family' IS NULL AS empty_has_none;
SELECT bloom_unseen(bloom_add(NULL::bloom, 5::bigint), ARRAY['5']);
\echo :SQLSTATE
SELECT bloom_add(NULL::bloom, 5::bigint) || bloom_add(NULL::bloom, '5'::text);
\echo :SQLSTATE
SELECT bloom_union_agg(f) FROM (VALUES (bloom_add(NULL::bloom, 1::bigint)), (bloom_add(NULL::bloom, 'x'::text))) v(f);
\echo :SQLSTATE
-- Empty and all-NULL arrays add and probe nothing, so they pass whatever their type.
SELECT bloom_add(bloom_add(NULL::bloom, 5::bigint), ARRAY[]::text[]) = bloom_add(NULL::bloom, 5::bigint) AS empty_add_is_no_op,
       bloom_unseen(bloom_add(NULL::bloom, 5::bigint), ARRAY[NULL]::text[]) AS null_candidates;
-- A version 1 value (written before 0.4.0) records no family: it takes any, and stays version 1.
SELECT bloom_info(v1)->>'format_version' AS v1, bloom_contains(v1, 5::bigint) AS has_5,
       bloom_info(bloom_add(v1, 'x'::text))->>'format_version' AS still_v1, bloom_contains(bloom_add(v1, 'x'::text), 'x') AS has_x
FROM (SELECT set_byte(set_byte(bloom_add(NULL::bloom, 5::bigint)::bytea, 4, 1), 7, 1)::bloom AS v1) s;

-- Leave nothing behind for the tests after this one.
DROP TABLE imp_bigint, imp_text, imp_uuid, imp_items, imp_nullable, imp_nullable_where, imp_has_null, imp_kinds, filters;

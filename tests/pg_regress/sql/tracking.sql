-- Impression tracking: seen_bloom.track / untrack / unseen / has_seen / filter / expire /
-- rebuild / stats, their semantics, and their errors.

CREATE TABLE impressions (
    id bigserial PRIMARY KEY,
    user_id bigint,
    post_id bigint,
    seen_at timestamptz NOT NULL DEFAULT now(),
    watch_pct real NOT NULL DEFAULT 1
);
-- Impressions already there are backfilled by track(); older than the window are not.
INSERT INTO impressions (user_id, post_id, seen_at)
SELECT u, u * 1000 + i, now() - i * interval '1 hour' FROM generate_series(1, 3) u, generate_series(1, 100) i;
INSERT INTO impressions (user_id, post_id, seen_at) VALUES (1, 999999, now() - interval '40 days');
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at', "where" => 'watch_pct >= 0.5') AS filter_table;
SELECT impressions::text, filter_table::text, user_type, item_type, "window", generations, capacity, error_rate, "where", layout
FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass;

-- Backfilled: every impression in the window is seen; the 40-day-old one is not.
SELECT cardinality(seen_bloom.unseen('impressions', 1::bigint, ARRAY(SELECT post_id FROM impressions WHERE user_id = 1 AND seen_at > now() - interval '30 days'))) AS unseen_of_seen;
SELECT seen_bloom.unseen('impressions', 1::bigint, ARRAY[999999, 1001, 1, 2, 1, NULL]::bigint[]) AS unseen;
SELECT seen_bloom.has_seen('impressions', 2::bigint, 2050) AS seen_2050, seen_bloom.has_seen('impressions', 2::bigint, 1050) AS seen_other_users;

-- New impressions are seen by the inserting transaction right away, by others at commit.
BEGIN;
INSERT INTO impressions (user_id, post_id) VALUES (7, 70), (7, 71), (8, 80);
SELECT seen_bloom.unseen('impressions', 7::bigint, ARRAY[70, 71, 72]::bigint[]) AS own_transaction;
ROLLBACK;
-- A rolled-back insert leaves no trace.
SELECT seen_bloom.unseen('impressions', 7::bigint, ARRAY[70, 71, 72]::bigint[]) AS after_rollback;
SELECT count(*) AS filter_rows_of_user_7 FROM impressions_seen WHERE user_key = 7;

-- Skipped: NULL users (anonymous), NULL items, rows failing the where predicate, rows older
-- than the window.
INSERT INTO impressions (user_id, post_id, watch_pct, seen_at) VALUES
    (NULL, 5, 1, now()), (9, NULL, 1, now()), (9, 90, 0.1, now()), (9, 91, 0.9, now()),
    (9, 92, 1, now() - interval '31 days');
SELECT seen_bloom.unseen('impressions', 9::bigint, ARRAY[5, 90, 91, 92]::bigint[]) AS unseen_for_9;
SELECT seen_bloom.unseen('impressions', NULL::bigint, ARRAY[1, 2, 2]::bigint[]) AS anonymous_has_seen_nothing;
-- has_seen agrees (since 0.5.0; it gave NULL, and WHERE NOT has_seen(...) emptied an
-- anonymous user's feed); a NULL item or table gives NULL.
SELECT seen_bloom.has_seen('impressions', NULL::bigint, 1::bigint) AS anonymous_has_seen,
       (SELECT count(*) FROM generate_series(1, 5) g WHERE NOT seen_bloom.has_seen('impressions', NULL::bigint, g::bigint)) AS anonymous_feed,
       seen_bloom.has_seen('impressions', 1::bigint, NULL::bigint) IS NULL AS null_item,
       seen_bloom.has_seen(NULL, 1::bigint, 1::bigint) IS NULL AS null_table;

-- Several tracked tables at once (the impressions and a served log): an item seen in any is
-- dropped, the candidates' order kept, as two nested calls answer.
CREATE TABLE served (user_id bigint, post_id bigint, served_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('served', 'user_id', 'post_id', 'served_at', "window" => '10 minutes') IS NOT NULL AS tracked;
INSERT INTO served (user_id, post_id) VALUES (9, 500), (9, 501);
SELECT seen_bloom.unseen_in(ARRAY['impressions', 'served']::regclass[], 9::bigint, ARRAY[501, 91, 502, 500, 90, 503, 502]::bigint[]) AS unseen_in_both,
       seen_bloom.unseen('served', 9::bigint, seen_bloom.unseen('impressions', 9::bigint, ARRAY[501, 91, 502, 500, 90, 503, 502]::bigint[])) AS two_calls;
SELECT seen_bloom.has_seen_in(ARRAY['impressions', 'served']::regclass[], 9::bigint, 500::bigint) AS served,
       seen_bloom.has_seen_in(ARRAY['impressions', 'served']::regclass[], 9::bigint, 91::bigint) AS impression,
       seen_bloom.has_seen_in(ARRAY['impressions', 'served']::regclass[], 9::bigint, 502::bigint) AS fresh,
       seen_bloom.has_seen_in(ARRAY['impressions', 'served']::regclass[], NULL::bigint, 500::bigint) AS anonymous;
-- No table: nothing seen; an anonymous user: nothing seen.
SELECT seen_bloom.unseen_in(ARRAY[]::regclass[], 9::bigint, ARRAY[91, 500]::bigint[]) AS no_table,
       seen_bloom.unseen_in(ARRAY['impressions', 'served']::regclass[], NULL::bigint, ARRAY[91, 500]::bigint[]) AS anonymous;
-- A NULL table (22004), a user of another type (42804), a table not tracked (55000).
\set VERBOSITY terse
SELECT seen_bloom.unseen_in(ARRAY['impressions', NULL]::regclass[], 9::bigint, ARRAY[1]::bigint[]);
\echo :SQLSTATE
SELECT seen_bloom.unseen_in(ARRAY['impressions', 'served']::regclass[], 'x'::text, ARRAY[1]::bigint[]);
\echo :SQLSTATE
SELECT seen_bloom.has_seen_in(ARRAY['served', 'impressions_seen']::regclass[], 9::bigint, 1::bigint);
\echo :SQLSTATE
SELECT seen_bloom.untrack('served');
DROP TABLE served;

-- An UPDATE that changes user or item counts as a new impression.
UPDATE impressions SET post_id = 93 WHERE user_id = 9 AND post_id = 91;
SELECT seen_bloom.unseen('impressions', 9::bigint, ARRAY[91, 93]::bigint[]) AS after_update;
-- DELETE may leave items in the filter (false positives) until a rebuild.
DELETE FROM impressions WHERE user_id = 9 AND post_id = 93;
SELECT seen_bloom.has_seen('impressions', 9::bigint, 93) AS still_reported_after_delete;
CALL seen_bloom.rebuild('impressions', 9::bigint);
SELECT seen_bloom.has_seen('impressions', 9::bigint, 93) AS deleted_after_rebuild, seen_bloom.has_seen('impressions', 9::bigint, 91) AS updated_away,
       seen_bloom.has_seen('impressions', 9::bigint, 92) AS outside_window;

-- The user's window as one bloom value, built from the impressions.
SELECT bloom_cardinality(seen_bloom.filter('impressions', 2::bigint)) AS items_of_user_2,
       bloom_contains(seen_bloom.filter('impressions', 2::bigint), 2050) AS has_2050;

-- A rebuild of every user; every impression in the window is seen afterwards.
CALL seen_bloom.rebuild('impressions');
SELECT count(*) AS impressions_not_seen_after_rebuild
FROM impressions i
WHERE i.user_id IS NOT NULL AND i.post_id IS NOT NULL AND i.watch_pct >= 0.5 AND i.seen_at > now() - interval '30 days'
  AND NOT seen_bloom.has_seen('impressions', i.user_id, i.post_id);

-- Observability and expiry (nothing is old enough to expire here).
SELECT users, filter_rows > 0 AS has_rows, total_bytes > 0 AS has_bytes, generations >= users AS generations_counted,
       saturated_generations, estimated_fpr_max < 0.01 AS fpr_ok
FROM seen_bloom.stats('impressions');
SELECT seen_bloom.expire('impressions') AS expired, seen_bloom.expire() AS expired_everywhere;

-- TRUNCATE of the impressions empties the filters.
TRUNCATE impressions;
SELECT count(*) AS filter_rows_after_truncate FROM impressions_seen;

-- Text and uuid users with bigint, integer, text and uuid items; a partitioned table.
CREATE TABLE events (account text, item int, at timestamptz DEFAULT now()) PARTITION BY RANGE (at);
CREATE TABLE events_now PARTITION OF events FOR VALUES FROM ('2000-01-01') TO ('2100-01-01');
SELECT seen_bloom.track('events', 'account', 'item', 'at') AS filter_table;
INSERT INTO events (account, item) VALUES ('alice', 1), ('alice', 2), ('bob', 3);
SELECT seen_bloom.unseen('events', 'alice'::text, ARRAY[1, 2, 3, 4]) AS alice_unseen;
CREATE TABLE uuid_views (viewer uuid, video uuid);
SELECT seen_bloom.track('uuid_views', 'viewer', 'video') AS filter_table;
INSERT INTO uuid_views VALUES ('00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-0000000000aa');
SELECT seen_bloom.unseen('uuid_views', '00000000-0000-0000-0000-000000000001'::uuid,
                         ARRAY['00000000-0000-0000-0000-0000000000aa', '00000000-0000-0000-0000-0000000000bb']::uuid[]) AS uuid_unseen;
CREATE TABLE text_items (u uuid, t text);
SELECT seen_bloom.track('text_items', 'u', 't') AS filter_table;
INSERT INTO text_items VALUES ('00000000-0000-0000-0000-000000000001', 'post:1');
SELECT seen_bloom.has_seen('text_items', '00000000-0000-0000-0000-000000000001'::uuid, 'post:1'::text) AS text_item_seen;

-- An integer user column (kept as bigint), varchar items (hashed as text) and a timestamp
-- time column, read as UTC whatever the session's time zone: 20 hours old is inside a 1-day
-- window, 40 hours is out (read in this session's +14 hours, the first would be 34 hours
-- old). The C trigger, a where predicate's SQL fold, a rebuild and filter() agree.
SET TimeZone = 'Pacific/Kiritimati';
CREATE TABLE serial_views (user_id serial, slug varchar(40), seen_at timestamp NOT NULL, w int DEFAULT 1);
CREATE TABLE serial_views_w (LIKE serial_views INCLUDING DEFAULTS);
SELECT seen_bloom.track('serial_views', 'user_id', 'slug', 'seen_at', "window" => '1 day', generations => 2) AS filter_table;
SELECT seen_bloom.track('serial_views_w', 'user_id', 'slug', 'seen_at', "window" => '1 day', generations => 2, "where" => 'w > 0') AS filter_table;
SELECT impressions, user_type, item_type FROM seen_bloom.tracked WHERE impressions::text LIKE 'serial_views%' ORDER BY 1;
INSERT INTO serial_views (user_id, slug, seen_at)
VALUES (7, 'a', (now() AT TIME ZONE 'UTC') - interval '1 hour'), (7, 'b', (now() AT TIME ZONE 'UTC') - interval '20 hours'),
       (7, 'c', (now() AT TIME ZONE 'UTC') - interval '40 hours');
INSERT INTO serial_views_w SELECT * FROM serial_views;
SELECT seen_bloom.unseen('serial_views', 7, ARRAY['a', 'b', 'c', 'd']::varchar[]) AS trigger_unseen,
       seen_bloom.unseen('serial_views_w', 7, ARRAY['a', 'b', 'c', 'd']) AS predicate_unseen,
       seen_bloom.has_seen('serial_views', 7, 'b'::varchar) AS b_seen,
       bloom_unseen(seen_bloom.filter('serial_views', 7), ARRAY['a', 'b', 'c', 'd']) AS filter_unseen;
CALL seen_bloom.rebuild('serial_views');
SELECT seen_bloom.unseen('serial_views', 7, ARRAY['a', 'b', 'c', 'd']) AS rebuilt_unseen;
SELECT seen_bloom.unseen('serial_views', 7::bigint, ARRAY['a']) AS bigint_user_unseen;
SELECT seen_bloom.unseen('serial_views', '7'::text, ARRAY['a']);
\echo :SQLSTATE
RESET TimeZone;
DROP TABLE serial_views, serial_views_w;

-- Many impressions for one user move the generation from the exact row to layers.
INSERT INTO events (account, item) SELECT 'carol', g FROM generate_series(1, 3000) g;
SELECT count(*) AS missing FROM generate_series(1, 3000) g WHERE NOT seen_bloom.has_seen('events', 'carol'::text, g);
SELECT max(layer) >= 1 AS layered, bool_and(length(bits) <= 1536) AS rows_stay_small FROM events_seen WHERE user_key = 'carol';
-- Layout 2: up to 192 hashes a generation stays an exact row, then its first layer is one
-- full row of 48 blocks (720 items at this budget), then a second layer of 228 blocks.
SELECT layer, count(*) AS row_count, sum(length(bits)) AS bytes FROM events_seen WHERE user_key = 'carol' GROUP BY layer ORDER BY layer;
INSERT INTO events (account, item) SELECT 'dave', g FROM generate_series(1, 192) g;
SELECT layer, length(bits) AS bytes FROM events_seen WHERE user_key = 'dave';
INSERT INTO events (account, item) VALUES ('dave', 193);
SELECT layer, length(bits) AS bytes FROM events_seen WHERE user_key = 'dave';
SELECT count(*) AS missing FROM generate_series(1, 193) g WHERE NOT seen_bloom.has_seen('events', 'dave'::text, g);
SELECT g AS layer, seen_bloom._layer_blocks(0.01 / 6, g, 1) AS layout_1_blocks, seen_bloom._layer_blocks(0.01 / 6, g, 2) AS layout_2_blocks
FROM generate_series(0, 2) g;

-- Privileges: a role that may only INSERT impressions still gets them folded in, but cannot
-- write the filter table; reading it needs a grant.
DROP ROLE IF EXISTS seen_bloom_app;
CREATE ROLE seen_bloom_app;
GRANT INSERT ON impressions TO seen_bloom_app;
GRANT USAGE ON SEQUENCE impressions_id_seq TO seen_bloom_app;
SET ROLE seen_bloom_app;
INSERT INTO impressions (user_id, post_id) VALUES (42, 4242);
UPDATE impressions_seen SET bits = '\x';
\echo :SQLSTATE
INSERT INTO impressions_seen VALUES (1, 1, 0, 0, '\x');
\echo :SQLSTATE
SELECT seen_bloom.unseen('impressions', 42::bigint, ARRAY[4242]::bigint[]);
\echo :SQLSTATE
RESET ROLE;
GRANT SELECT ON impressions_seen TO seen_bloom_app;
SET ROLE seen_bloom_app;
SELECT seen_bloom.unseen('impressions', 42::bigint, ARRAY[4242, 4343]::bigint[]) AS app_reads_after_grant;
RESET ROLE;
DROP OWNED BY seen_bloom_app;
DROP ROLE seen_bloom_app;

-- Objects a hostile role puts in public cannot hijack the trigger or the read path: a
-- look-alike now() and an = operator that says every bigint equals every other are never
-- called, even with public searched before pg_catalog.
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT '2001-01-01'::timestamptz $$;
CREATE FUNCTION public.always_equal(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.always_equal);
SET search_path = public, pg_catalog;
INSERT INTO impressions (user_id, post_id) VALUES (43, 4343);
SELECT seen_bloom.has_seen('impressions', 43::bigint, 4343) AS folded_despite_hostile_now,
       seen_bloom.unseen('impressions', 44::bigint, ARRAY[4343, 1]::bigint[]) AS other_users_rows_not_matched;
RESET search_path;
DROP OPERATOR public.= (bigint, bigint);
DROP FUNCTION public.always_equal(bigint, bigint);
DROP FUNCTION public.now();

-- Errors, each with its SQLSTATE.
SELECT seen_bloom.track('impressions', 'user_id', 'post_id');
\echo :SQLSTATE
SELECT seen_bloom.track('no_such_table', 'user_id', 'post_id');
\echo :SQLSTATE
CREATE TABLE bad (u int, i numeric, t date, "we""ird; name" bigint);
SELECT seen_bloom.track('bad', 'nope', 'i');
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'u', 'i');
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'i');
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'u', 't');
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'u', "window" => '-1 day');
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'u', capacity => 0);
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'u', error_rate => 1.5);
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'u', "where" => 'true); DROP TABLE impressions; SELECT (true');
\echo :SQLSTATE
SELECT seen_bloom.track('bad', 'we"ird; name', 'u', "where" => 'no_such_column > 1');
\echo :SQLSTATE
SELECT count(*) AS impressions_table_still_there FROM impressions;
-- A layout number this build does not know (a hand-edited catalogue, a newer dump): 22023.
SELECT seen_bloom._layer_blocks(0.01 / 6, 0, 4);
\echo :SQLSTATE
SELECT seen_bloom._fold('events_seen', 0.01 / 6, 0, ARRAY['x'], ARRAY[1], ARRAY[1]::bigint[]);
\echo :SQLSTATE
-- Quotes and semicolons in names are fine where they are real names.
SELECT seen_bloom.track('bad', 'we"ird; name', 'u') AS filter_table;
INSERT INTO bad VALUES (5, 1, now(), 77);
SELECT seen_bloom.has_seen('bad', 77::bigint, 5) AS weird_name_works;
SELECT seen_bloom.untrack('bad');
SELECT seen_bloom.untrack('bad');
\echo :SQLSTATE
SELECT seen_bloom.unseen('bad', 1::bigint, ARRAY[1]);
\echo :SQLSTATE
SELECT seen_bloom.stats('bad');
\echo :SQLSTATE
SELECT seen_bloom.expire('bad');
\echo :SQLSTATE
SELECT seen_bloom.unseen('impressions', 1::bigint, ARRAY[1.5]);
\echo :SQLSTATE

-- Settings change by retrack only: an edit of the row would leave backends on the old window
-- (55000, and the row unchanged). retrack keeps the columns and predicate, fills the new
-- filter table in batches and swaps it in under the old name, leaving nothing of the move;
-- the window it sets is the one read: an impression 20 days old is no longer seen at 7 days.
-- (tests/integration/retrack.sh runs it under writers.)
UPDATE seen_bloom.tracked SET "window" = '7 days' WHERE impressions = 'impressions'::regclass;
\echo :SQLSTATE
INSERT INTO impressions (user_id, post_id, seen_at) VALUES (11, 1101, now() - interval '20 days'), (11, 1102, now() - interval '2 days');
SELECT seen_bloom.unseen('impressions', 11::bigint, ARRAY[1101, 1102, 1103]::bigint[]) AS before_retrack;
CALL seen_bloom.retrack('impressions', "window" => '7 days', generations => 7);
SELECT filter_table, (SELECT count(*) FROM seen_bloom.retracking) AS moves_left,
       (SELECT count(*) FROM pg_class WHERE relname LIKE 'impressions_seen_next%') AS tables_left
FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass;
SELECT "window", generations, generation_seconds, capacity, error_rate, "where", layout
FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass;
SELECT seen_bloom.unseen('impressions', 11::bigint, ARRAY[1101, 1102, 1103]::bigint[]) AS after_retrack;
CALL seen_bloom.retrack('impressions', error_rate => 0.001);
SELECT "window" AS window_kept, error_rate FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass;
CALL seen_bloom.retrack(NULL);
\echo :SQLSTATE
CALL seen_bloom.retrack('bad', "window" => '1 day');
\echo :SQLSTATE
CALL seen_bloom.retrack('impressions', generations => 0);
\echo :SQLSTATE
CALL seen_bloom.retrack('impressions', error_rate => 1.5);
\echo :SQLSTATE
BEGIN;
CALL seen_bloom.retrack('impressions', "window" => '8 days');
\echo :SQLSTATE
ROLLBACK;
-- A failed start leaves nothing.
SELECT (SELECT count(*) FROM seen_bloom.retracking) AS moves_left,
       (SELECT count(*) FROM pg_class WHERE relname LIKE 'impressions_seen_next%') AS tables_left;

-- untrack removes triggers, filter table and catalog row.
SELECT seen_bloom.untrack('impressions');
SELECT to_regclass('impressions_seen') IS NULL AS filter_table_dropped,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'impressions'::regclass AND NOT tgisinternal) AS triggers_left,
       (SELECT count(*) FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass) AS catalog_rows;
INSERT INTO impressions (user_id, post_id) VALUES (1, 1);

-- capacity sizes a generation's first layer for its share, capacity / generations items
-- (layout 1000 + that share): at 0.1%, 600 items of a generation stay in one layer of two
-- rows, where a table tracked without a capacity (layout 3) starts a second layer.
CREATE TABLE cap_imp (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE nocap_imp (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('cap_imp', 'user_id', 'post_id', 'seen_at', capacity => 3000, error_rate => 0.001) IS NOT NULL AS tracked;
SELECT seen_bloom.track('nocap_imp', 'user_id', 'post_id', 'seen_at', error_rate => 0.001) IS NOT NULL AS tracked;
SELECT impressions, layout, capacity FROM seen_bloom.tracked WHERE impressions IN ('cap_imp'::regclass, 'nocap_imp'::regclass) ORDER BY 1;
INSERT INTO cap_imp SELECT 1, g, now() FROM generate_series(1, 600) g;
INSERT INTO nocap_imp SELECT 1, g, now() FROM generate_series(1, 600) g;
SELECT 'cap' AS t, layer, count(*) AS rows, sum(length(bits)) AS bytes FROM cap_imp_seen GROUP BY 1, 2
UNION ALL SELECT 'nocap', layer, count(*), sum(length(bits)) FROM nocap_imp_seen GROUP BY 1, 2 ORDER BY 1, 2;
SELECT cardinality(seen_bloom.unseen('cap_imp', 1::bigint, ARRAY(SELECT g::bigint FROM generate_series(1, 600) g))) AS unseen_held,
       cardinality(seen_bloom.unseen('cap_imp', 1::bigint, ARRAY(SELECT g::bigint FROM generate_series(10001, 20000) g))) BETWEEN 9990 AND 10000 AS fresh_unseen;
-- retrack keeps a capacity (its share follows the generations) and gives none to a table
-- tracked without.
CALL seen_bloom.retrack('cap_imp', generations => 10);
CALL seen_bloom.retrack('nocap_imp', generations => 10);
SELECT impressions, layout, capacity FROM seen_bloom.tracked WHERE impressions IN ('cap_imp'::regclass, 'nocap_imp'::regclass) ORDER BY 1;
SELECT cardinality(seen_bloom.unseen('cap_imp', 1::bigint, ARRAY(SELECT g::bigint FROM generate_series(1, 600) g))) AS unseen_held;
DROP TABLE cap_imp, nocap_imp;

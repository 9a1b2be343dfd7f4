-- seen_bloom.compact: the rows of users with a closed generation and of heavy users replaced
-- by one filter sized for their items.
SET client_min_messages = notice;
CREATE TABLE c1 (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON c1 (user_id);
SELECT seen_bloom.track('c1', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
-- User 1 holds 20,000 items over the window (layered rows past 64 KB), user 2 holds 100 in
-- the open generation, user 3 holds 50 in a closed one (generations of 6 days).
INSERT INTO c1 SELECT 1, g, now() - (g::float8 / 20000) * interval '29 days' FROM generate_series(1, 20000) g;
INSERT INTO c1 SELECT 2, g, now() FROM generate_series(1, 100) g;
INSERT INTO c1 SELECT 3, g, now() - interval '10 days' FROM generate_series(1, 50) g;
SELECT user_key, count(*) > 10 AS many_rows, sum(length(bits)) > 65536 AS over_min_bytes
FROM c1_seen GROUP BY 1 ORDER BY 1;
CREATE TABLE rows_2 AS SELECT generation, layer, segment, bits FROM c1_seen WHERE user_key = 2;

-- User 1 is heavy and user 3's generation has closed: one compacted row each (layer -2), a
-- static filter at half the error rate (an xor filter of k = 8 fingerprint bits, about 9.8
-- bits per item).
CALL seen_bloom.compact('c1');
-- Its filter is cut by item hash into parts, one row each (segment i), short enough that five
-- share a page.
SELECT count(*) AS rows, min(segment) = 0 AND max(segment) = count(*) - 1 AS parts_numbered,
       sum(length(bits)) BETWEEN 25000 AND 28500 AS static_size, avg(length(bits)) <= 1416 AS five_per_page
FROM c1_seen WHERE user_key = 1 AND layer = -2;
SELECT user_key, layer, count(*) AS rows FROM c1_seen WHERE user_key = 3 GROUP BY 1, 2;
SELECT cardinality(seen_bloom.unseen('c1', 3::bigint, ARRAY(SELECT g FROM generate_series(1, 50) g))) AS unseen_user_3;
SELECT bool_and(generation = seen_bloom.generation_of(now(), (SELECT generation_seconds FROM seen_bloom.tracked
                                                   WHERE impressions = 'c1'::regclass))) AS keyed_by_newest_generation,
       bool_and(seen_bloom._compacted_oldest(bits) < generation) AS oldest_in_header
FROM c1_seen WHERE user_key = 1;
SELECT count(*) = (SELECT count(*) FROM rows_2) AS user_2_unchanged
FROM c1_seen s JOIN rows_2 r USING (generation, layer, segment, bits) WHERE s.user_key = 2;

-- Every item still seen; fresh ids pass at about half the table's error rate.
SELECT cardinality(seen_bloom.unseen('c1', 1::bigint, ARRAY(SELECT g FROM generate_series(1, 20000) g))) AS unseen_held;
SELECT (100000 - cardinality(seen_bloom.unseen('c1', 1::bigint,
        ARRAY(SELECT g FROM generate_series(10000001, 10100000) g)))) BETWEEN 250 AND 750 AS fpr_near_half_percent;
SELECT seen_bloom.has_seen('c1', 1::bigint, 12345::bigint) AS seen_12345;
-- A part missing (compact writes them all in one statement) is refused, not read as fewer
-- items (22P02).
BEGIN;
DELETE FROM c1_seen WHERE user_key = 1 AND layer = -2 AND segment = 0;
\set VERBOSITY terse
SELECT seen_bloom.has_seen('c1', 1::bigint, 12345::bigint);
\echo :SQLSTATE
\set VERBOSITY default
ROLLBACK;
SELECT users, filter_rows, estimated_fpr_max BETWEEN 0.0035 AND 0.0045 AS compacted_fpr_estimated
FROM seen_bloom.stats('c1');

-- Impressions after a compaction fold into layered rows beside it, in any generation.
INSERT INTO c1 SELECT 1, g, now() FROM generate_series(30001, 30300) g;
INSERT INTO c1 VALUES (1, 40001, now() - interval '20 days');
SELECT count(*) FILTER (WHERE layer = -2) AS compacted, count(*) FILTER (WHERE layer <> -2) > 0 AS layered
FROM c1_seen WHERE user_key = 1;
SELECT cardinality(seen_bloom.unseen('c1', 1::bigint,
        ARRAY(SELECT g FROM generate_series(1, 20000) g UNION ALL SELECT g FROM generate_series(30001, 30300) g
              UNION ALL SELECT 40001))) AS unseen_held;
-- A transaction's own impressions, written in place at commit, read beside the compacted row.
BEGIN;
INSERT INTO c1 VALUES (1, 50001, now());
SELECT seen_bloom.has_seen('c1', 1::bigint, 50001::bigint) AS own_insert_seen;
ROLLBACK;

-- min_bytes 0: every user with layered rows, user 1 again (now with the new items) and user 2.
CALL seen_bloom.compact('c1', 0);
SELECT user_key, count(*) AS rows, bool_and(layer = -2) AS compacted FROM c1_seen GROUP BY 1 ORDER BY 1;
SELECT cardinality(seen_bloom.unseen('c1', 1::bigint,
        ARRAY(SELECT g FROM generate_series(1, 20000) g UNION ALL SELECT g FROM generate_series(30001, 30300) g
              UNION ALL SELECT 40001))) AS unseen_held,
       cardinality(seen_bloom.unseen('c1', 2::bigint, ARRAY(SELECT g FROM generate_series(1, 100) g))) AS unseen_user_2;
-- Nothing over min_bytes and nothing stale: no users.
CALL seen_bloom.compact('c1');
-- rebuild turns a compacted user back into layered rows, with the same items.
CALL seen_bloom.rebuild('c1', 2::bigint);
SELECT count(*) FILTER (WHERE layer = -2) AS compacted_rows_of_user_2 FROM c1_seen WHERE user_key = 2;
SELECT cardinality(seen_bloom.unseen('c1', 2::bigint, ARRAY(SELECT g FROM generate_series(1, 100) g))) AS unseen_user_2;

-- A compacted row holding an expired generation is stale: compact rebuilds it without those
-- items. A 4-second window has generations of one second.
CREATE TABLE c2 (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('c2', 'user_id', 'post_id', 'seen_at', '4 seconds') IS NOT NULL AS tracked;
INSERT INTO c2 SELECT 1, g, now() - interval '3 seconds' FROM generate_series(1, 50) g;
INSERT INTO c2 SELECT 1, g, now() FROM generate_series(101, 150) g;
CALL seen_bloom.compact('c2', 0);
SELECT cardinality(seen_bloom.unseen('c2', 1::bigint, ARRAY(SELECT g FROM generate_series(1, 150) g))) AS unseen_before;
SELECT pg_sleep(2);
CALL seen_bloom.compact('c2');
SELECT count(*) AS rows, bool_and(layer = -2) AS compacted FROM c2_seen;
SELECT cardinality(seen_bloom.unseen('c2', 1::bigint, ARRAY(SELECT g FROM generate_series(1, 50) g))) AS expired_unseen,
       cardinality(seen_bloom.unseen('c2', 1::bigint, ARRAY(SELECT g FROM generate_series(101, 150) g))) AS live_unseen;

-- health(): a user of 60,000 items in one generation holds far more than 256 KB of layered
-- rows; a compacted row holding a generation long gone (forged here) is stale. compact fixes
-- both.
INSERT INTO c2 SELECT 2, g, now() FROM generate_series(1, 60000) g;
INSERT INTO c2_seen SELECT 3, generation, -2, 0, seen_bloom._compacted(ARRAY[seen_bloom.item_hash(7::bigint)], 0.005, generation - 10, generation)
FROM c2_seen WHERE user_key = 1;
SELECT problem, fix FROM seen_bloom.health() WHERE impressions = 'c2'::regclass;
CALL seen_bloom.compact('c2');
SELECT count(*) AS problems FROM seen_bloom.health() WHERE impressions = 'c2'::regclass;
SELECT user_key, count(*) AS rows, bool_and(layer = -2) AS compacted FROM c2_seen GROUP BY 1 ORDER BY 1;
SELECT cardinality(seen_bloom.unseen('c2', 2::bigint, ARRAY(SELECT g FROM generate_series(1, 60000) g))) AS unseen_user_2;

-- Errors: not tracked (55000), NULL table (22004), min_bytes below 0 or NULL (22023), inside
-- a transaction block, where it cannot commit (2D000).
\set VERBOSITY terse
CALL seen_bloom.compact('rows_2');
\echo :SQLSTATE
CALL seen_bloom.compact(NULL);
\echo :SQLSTATE
CALL seen_bloom.compact('c1', -1);
\echo :SQLSTATE
CALL seen_bloom.compact('c1', NULL);
\echo :SQLSTATE
BEGIN;
CALL seen_bloom.compact('c1', 0);
\echo :SQLSTATE
ROLLBACK;
-- rebuild of a whole table commits as it goes too.
BEGIN;
CALL seen_bloom.rebuild('c1');
\echo :SQLSTATE
ROLLBACK;
\set VERBOSITY default
-- A malformed compacted row is refused by reads (22P02), never read as something else.
UPDATE c1_seen SET bits = '\x00'::bytea WHERE user_key = 1;
SELECT seen_bloom.has_seen('c1', 1::bigint, 1::bigint);
\echo :SQLSTATE

SELECT seen_bloom.untrack('c1'), seen_bloom.untrack('c2');
DROP TABLE c1, c2, rows_2;

-- compact keeps what the layered rows keep: every impression of a live generation, also one
-- that has left the window itself (an item stays seen up to window + window / generations).
-- A 20-second window of two 10-second generations; the impression is folded 0.5 s inside
-- the window and compacted 1.5 s later, outside it, its generation still the oldest live one
-- (the waits keep both instants in one generation).
CREATE TABLE edge (u bigint, i bigint, t timestamptz NOT NULL);
SELECT seen_bloom.track('edge', 'u', 'i', 't', "window" => '20 seconds', generations => 2) AS filter_table;
SELECT pg_sleep(CASE WHEN m > 5 THEN 10.1 - m ELSE 0 END) IS NULL AS waited
FROM (SELECT mod(extract(epoch FROM clock_timestamp() - interval '20 seconds')::numeric, 10) AS m) s;
INSERT INTO edge VALUES (1, 7, clock_timestamp() - interval '19.5 seconds');
SELECT pg_sleep(1.5) IS NULL AS waited;
SELECT now() - interval '20 seconds' > (SELECT t FROM edge) AS outside_the_window,
       seen_bloom.has_seen('edge', 1::bigint, 7::bigint) AS seen_before_compact;
CALL seen_bloom.compact('edge', 0);
SELECT count(*) FILTER (WHERE layer = -2) AS compacted_rows, count(*) AS rows FROM edge_seen;
SELECT seen_bloom.has_seen('edge', 1::bigint, 7::bigint) AS seen_after_compact;
SELECT seen_bloom.untrack('edge');
DROP TABLE edge;

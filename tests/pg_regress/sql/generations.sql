-- Generations and the window's edge have one definition (src/generations.rs), which the C
-- trigger, the SQL folds, the reads, expire and stats share. The window ends at `at` and
-- starts at at - window, computed as timestamptz - interval is: calendar months, and the
-- session's time zone across a DST change.
\set VERBOSITY terse
SET timezone = 'UTC';

-- Whole generation_seconds since 1970; infinity and generations past int4 are NULL.
SELECT seen_bloom.generation_of('2000-01-01 00:00:00+00', 86400) AS day_10957,
       seen_bloom.generation_of('1999-12-31 23:59:59.999999+00', 86400) AS day_10956,
       seen_bloom.generation_of('infinity', 86400) IS NULL AS infinity_is_null,
       seen_bloom.generation_of('-infinity', 86400) IS NULL AS minus_infinity_is_null,
       seen_bloom.generation_of('2040-01-01+00', 1) IS NULL AS past_int4_is_null;

-- A '1 month' window ending 2026-03-31 12:00 starts a calendar month back, 2026-02-28 12:00
-- (31 days; the read path once started 30 days back and missed a day of impressions); its
-- start is kept, the moment before it is not, and the oldest live generation is the start's.
SELECT seen_bloom._live_generation('2026-02-28 12:00+00', '2026-03-31 12:00+00', '1 month', 3600)
         = seen_bloom.generation_of('2026-02-28 12:00+00', 3600) AS start_kept,
       seen_bloom._live_generation('2026-02-28 11:59:59.999999+00', '2026-03-31 12:00+00', '1 month', 3600)
         IS NULL AS before_start_not_kept,
       seen_bloom._oldest_live_generation('2026-03-31 12:00+00', '1 month', 3600)
         = seen_bloom.generation_of('2026-02-28 12:00+00', 3600) AS oldest_is_the_start,
       seen_bloom._oldest_live_generation('2026-03-31 12:00+00', '1 month', 3600)
         < seen_bloom.generation_of('2026-03-31 12:00+00'::timestamptz - interval '720 hours', 3600)
         AS older_than_30_days;
-- A '1 month' window ending 2026-03-01 12:00 starts 2026-02-01 12:00 (28 days back).
SELECT seen_bloom._oldest_live_generation('2026-03-01 12:00+00', '1 month', 3600)
         = seen_bloom.generation_of('2026-02-01 12:00+00', 3600) AS february;

-- New York's 2026-03-08 has 23 hours: a '1 day' window ending 03-08 12:00 EDT starts at
-- 03-07 12:00 EST, 23 hours back.
SET timezone = 'America/New_York';
SELECT seen_bloom._oldest_live_generation('2026-03-08 12:00', '1 day', 3600)
         = seen_bloom.generation_of('2026-03-08 12:00'::timestamptz - interval '23 hours', 3600) AS dst_23_hours,
       seen_bloom._live_generation('2026-03-07 12:00', '2026-03-08 12:00', '1 day', 3600) IS NOT NULL AS start_kept,
       seen_bloom._live_generation('2026-03-07 11:59:59', '2026-03-08 12:00', '1 day', 3600) IS NULL AS before_start_not_kept,
       seen_bloom._live_generation('infinity', '2026-03-08 12:00', '1 day', 3600) IS NULL AS infinity_not_kept;
-- And 2026-11-01 has 25 hours.
SELECT seen_bloom._oldest_live_generation('2026-11-01 12:00', '1 day', 3600)
         = seen_bloom.generation_of('2026-11-01 12:00'::timestamptz - interval '25 hours', 3600) AS dst_25_hours;
RESET timezone;

-- End to end, on a '1 month' window: an impression just inside the window is folded by the
-- trigger and by backfill, reported seen, and kept by expire; one just outside is not folded.
CREATE TABLE gen_impressions (user_id bigint, item_id bigint, seen_at timestamptz);
INSERT INTO gen_impressions VALUES
    (1, 100, now() - interval '1 month' + interval '1 minute'),
    (1, 101, now() - interval '1 month' - interval '1 minute');
SELECT seen_bloom.track('gen_impressions', 'user_id', 'item_id', 'seen_at', "window" => '1 month') IS NOT NULL AS tracked;
INSERT INTO gen_impressions VALUES
    (2, 200, now() - interval '1 month' + interval '1 minute'),
    (2, 201, now() - interval '1 month' - interval '1 minute');
SELECT u, seen_bloom.has_seen('gen_impressions', u, u * 100) AS inside_seen,
       seen_bloom.has_seen('gen_impressions', u, u * 100 + 1) AS outside_seen
FROM (VALUES (1::bigint), (2)) v(u) ORDER BY u;
SELECT seen_bloom.expire('gen_impressions') AS expired;
SELECT seen_bloom.unseen('gen_impressions', 2::bigint, ARRAY[200, 201]::bigint[]) AS unseen_after_expire;
SELECT seen_bloom.untrack('gen_impressions');
DROP TABLE gen_impressions;

-- A C function read through a SQL declaration that does not match the library is 42P13,
-- not an integer read as a pointer.
CREATE FUNCTION pg_temp.unseen_of_bigint(bloom, bigint) RETURNS bigint[]
    AS '$libdir/seen_bloom', 'bloom_unseen' LANGUAGE C;
SELECT pg_temp.unseen_of_bigint(bloom_empty(), 5);
\echo :SQLSTATE
CREATE FUNCTION pg_temp.empty_of_text(text) RETURNS bloom
    AS '$libdir/seen_bloom', 'bloom_empty' LANGUAGE C;
SELECT pg_temp.empty_of_text('100');
\echo :SQLSTATE

-- track(..., generations => N): the window cut in N generations of window / N (the edge
-- error), each with error_rate / (N + 1) of the budget. 2 to 60 are offered (22023 outside).
CREATE TABLE gen_n (user_id bigint, item_id bigint, seen_at timestamptz NOT NULL);
SELECT seen_bloom.track('gen_n', 'user_id', 'item_id', 'seen_at', generations => 1);
\echo :SQLSTATE
SELECT seen_bloom.track('gen_n', 'user_id', 'item_id', 'seen_at', generations => 61);
\echo :SQLSTATE
DROP TABLE gen_n;

-- For every N: a user holding 30,000 items spread over the whole window (no capacity: every
-- generation's layers filled past the first, where the rate nears its bound) has every one
-- reported seen (no false negative) and at most the configured rate of 200,000 fresh
-- candidates reported seen.
CREATE FUNCTION pg_temp.window_of(n int) RETURNS TABLE (
    generations int, generation_seconds bigint, error_rate_per_generation float8,
    live_generations bigint, false_negatives int, false_positive_rate numeric)
LANGUAGE plpgsql AS $$
DECLARE
    fresh bigint[] := ARRAY(SELECT 1000000000 + g FROM generate_series(1, 200000) g);
    held bigint[] := ARRAY(SELECT g::bigint FROM generate_series(1, 30000) g);
BEGIN
    DROP TABLE IF EXISTS gen_n;
    CREATE TABLE gen_n (user_id bigint, item_id bigint, seen_at timestamptz NOT NULL);
    PERFORM seen_bloom.track('gen_n', 'user_id', 'item_id', 'seen_at', "window" => '30 days',
                             error_rate => 0.01, generations => n);
    INSERT INTO gen_n SELECT 1, g, now() - interval '30 days' * (g - 0.5) / 30000 FROM generate_series(1, 30000) g;
    -- The filter rows are counted below in this transaction: a read of the user first folds
    -- what the transaction left to its commit.
    PERFORM seen_bloom.has_seen('gen_n', 1::bigint, 0::bigint);
    RETURN QUERY SELECT t.generations, t.generation_seconds, t.error_rate_per_generation,
        (SELECT count(DISTINCT generation) FROM gen_n_seen),
        cardinality(seen_bloom.unseen('gen_n', 1::bigint, held)),
        round(1 - cardinality(seen_bloom.unseen('gen_n', 1::bigint, fresh))::numeric / 200000, 4)
    FROM seen_bloom.tracked t WHERE t.impressions = 'gen_n'::regclass;
    PERFORM seen_bloom.untrack('gen_n');
    DROP TABLE gen_n;
END $$;
-- (The rate itself, 0.5% to 0.75%, depends on where now() falls in a generation: items
-- land in other generations from run to run. Above 0.2% shows the layers were filled. The
-- items span N + 1 generations, or N when the newest, 43 s old, falls just before a
-- generation boundary: a run within 43 s after midnight UTC saw 30 of 30-day windows.)
SELECT w.generations, w.generation_seconds, w.error_rate_per_generation,
       w.live_generations IN (w.generations, w.generations + 1) AS n_or_n_plus_1_generations,
       w.false_negatives, w.false_positive_rate <= 0.01 AS within_rate,
       w.false_positive_rate > 0.002 AS near_the_bound
FROM unnest(ARRAY[2, 5, 10, 15, 30, 60]) n, pg_temp.window_of(n) w;

-- seen_bloom.health() beyond triggers, and seen_bloom.activity without shared memory.
SET client_min_messages = notice;
CREATE TABLE health_imp (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('health_imp', 'user_id', 'post_id', 'seen_at');
INSERT INTO health_imp (user_id, post_id) SELECT g % 10, g FROM generate_series(1, 500) g;
SELECT * FROM seen_bloom.health() WHERE impressions = 'health_imp'::regclass;

-- A saturated generation: a Bloom row with every bit set answers "seen" to anything.
INSERT INTO health_imp_seen
SELECT 99, seen_bloom.generation_of(now(), t.generation_seconds), 0, 0, decode(repeat('ff', 32), 'hex')
FROM seen_bloom.tracked t WHERE t.impressions = 'health_imp'::regclass;
SELECT problem LIKE 'users over the error rate: 1 saturated generations%' AS saturated, fix LIKE 'CALL seen_bloom.compact(%min_bytes => 0)%' AS fix
FROM seen_bloom.health() WHERE impressions = 'health_imp'::regclass;
-- The advice changes what it reports: each user's window is rebuilt from its impressions.
CALL seen_bloom.compact('health_imp', min_bytes => 0);
SELECT count(*) AS over_capacity_after_compact FROM seen_bloom.health()
WHERE impressions = 'health_imp'::regclass AND problem LIKE 'users over the error rate%';
SELECT count(*) AS rows_of_user_99 FROM health_imp_seen WHERE user_key = 99;

-- Rows of a generation long out of the window: expire has not run.
INSERT INTO health_imp_seen
SELECT 98, seen_bloom._oldest_live_generation(now(), t."window", t.generation_seconds) - 3, -1, 0, '\x0000000000000001'::bytea
FROM seen_bloom.tracked t WHERE t.impressions = 'health_imp'::regclass;
SELECT problem, fix LIKE 'SELECT seen_bloom.expire(%' AS fix FROM seen_bloom.health() WHERE impressions = 'health_imp'::regclass;
SELECT seen_bloom.expire('health_imp');
SELECT count(*) AS problems FROM seen_bloom.health() WHERE impressions = 'health_imp'::regclass;

-- An impression dated 400 days ahead is folded as dated (it would stay seen for 400 days
-- past the window): health() names it, and a rebuild after the time is corrected clears it.
INSERT INTO health_imp VALUES (97, 1, now() + interval '400 days');
SELECT problem LIKE '1 users have impressions dated more than a generation%' AS future, fix LIKE 'Correct the times%CALL seen_bloom.rebuild(%' AS fix
FROM seen_bloom.health() WHERE impressions = 'health_imp'::regclass;
UPDATE health_imp SET seen_at = now() WHERE user_id = 97;
CALL seen_bloom.rebuild('health_imp', 97::bigint);
SELECT count(*) AS problems FROM seen_bloom.health() WHERE impressions = 'health_imp'::regclass;
SELECT seen_bloom.has_seen('health_imp', 97::bigint, 1::bigint) AS still_seen;

-- Without seen_bloom in shared_preload_libraries: no counters, a NOTICE that says why.
SELECT * FROM seen_bloom.activity;
SELECT seen_bloom.activity_reset();
SELECT seen_bloom.activity_reset('health_imp');
SELECT seen_bloom.untrack('health_imp');
DROP TABLE health_imp;

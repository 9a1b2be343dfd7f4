-- The ingest benchmarks' table (bench/fold_cpu.sh, bench/ingest_ab.sh): r3000, 1,000 users
-- of 3,000 items over a 30-day window, as the suite's writes section loads it, tracked.
CREATE EXTENSION seen_bloom;
CREATE TABLE r3000 (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                    seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real NOT NULL DEFAULT 1);
CREATE INDEX r3000_user_post ON r3000 (user_id, post_id);
INSERT INTO r3000 (user_id, post_id, seen_at)
SELECT u, (u * 1000003 + i) % 1000000007, now() - (i::float8 / 3000) * interval '29 days 23 hours'
FROM generate_series(1::bigint, 1000) u, generate_series(1, 3000) i;
SELECT seen_bloom.track('r3000', 'user_id', 'post_id', 'seen_at');
VACUUM ANALYZE r3000;
VACUUM ANALYZE r3000_seen;

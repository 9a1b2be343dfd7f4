-- seen_bloom.set_user_cap: a user's generation takes in at most user_cap items, the rest
-- staying in the table, unfolded. Every fold path caps alike: the statement trigger (layout
-- 3, folded at commit), a `where` table's SQL trigger, and rebuild. Each refusal shows its
-- SQLSTATE. (seen_bloom.activity's counts of the refusals: tests/integration/prometheus.sh,
-- which preloads the library.)
SET client_min_messages = warning;
CREATE TABLE cap_imp (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('cap_imp', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
SELECT seen_bloom.set_user_cap('cap_imp', 300);
SELECT user_cap FROM seen_bloom.tracked WHERE impressions = 'cap_imp'::regclass;
-- User 1 is offered 3,000 items in one generation, 0.1 s apart: its filter holds about
-- 300, the first ones; user 2's 200 are all held.
INSERT INTO cap_imp (user_id, post_id, seen_at) SELECT 1, g, now() - (3000 - g) * interval '0.1 second' FROM generate_series(1, 3000) g;
INSERT INTO cap_imp (user_id, post_id) SELECT 2, g FROM generate_series(1, 200) g;
SELECT count(*) FILTER (WHERE seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) BETWEEN 270 AND 330 AS user_1_near_cap,
       bool_and(seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) FILTER (WHERE g <= 250) AS first_250_held
FROM generate_series(1, 3000) g;
SELECT count(*) FILTER (WHERE seen_bloom.has_seen('cap_imp', 2::bigint, g::bigint)) AS user_2_held FROM generate_series(1, 200) g;
SELECT count(*) AS impressions_kept FROM cap_imp;
-- health() names the capped user, and the change that would take more in.
SELECT problem LIKE '1 users reached the per-user cap of 300 items%' AS named,
       fix LIKE '%seen_bloom.set_user_cap(''public.cap_imp'', 600)%' AS fix
FROM seen_bloom.health() WHERE impressions = 'cap_imp'::regclass;

-- Raised in this session: its next statement folds with the new cap.
SELECT seen_bloom.set_user_cap('cap_imp', 100000);
INSERT INTO cap_imp (user_id, post_id) SELECT 1, g FROM generate_series(3001, 3500) g;
SELECT bool_and(seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) AS raised_cap_takes_all FROM generate_series(3001, 3500) g;
SELECT count(*) AS problems_under_raised_cap FROM seen_bloom.health() WHERE impressions = 'cap_imp'::regclass;
-- Rebuild folds from the table under the cap in force: user 1 holds about 300 again.
SELECT seen_bloom.set_user_cap('cap_imp', 300);
CALL seen_bloom.rebuild('cap_imp');
SELECT count(*) FILTER (WHERE seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) BETWEEN 270 AND 330 AS rebuilt_near_cap,
       count(*) FILTER (WHERE seen_bloom.has_seen('cap_imp', 2::bigint, g::bigint) AND g <= 200) AS user_2_held
FROM generate_series(1, 3500) g;
-- Compact sizes a capped user for its first 300 items by time (ties by item hash): the same
-- items, in one filter of their size.
CALL seen_bloom.compact('cap_imp', min_bytes => 0);
SELECT count(*) FILTER (WHERE seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) BETWEEN 270 AND 330 AS compacted_near_cap,
       bool_and(seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) FILTER (WHERE g <= 250) AS first_250_held,
       count(*) FILTER (WHERE seen_bloom.has_seen('cap_imp', 2::bigint, g::bigint) AND g <= 200) AS user_2_held
FROM generate_series(1, 3500) g;
SELECT count(*) AS compacted_rows, max(length(bits)) < 600 AS sized_for_300 FROM cap_imp_seen WHERE user_key = 1 AND layer = -2;
-- No cap: the next impressions are all taken in.
SELECT seen_bloom.set_user_cap('cap_imp', NULL);
INSERT INTO cap_imp (user_id, post_id) SELECT 1, g FROM generate_series(3501, 4500) g;
SELECT bool_and(seen_bloom.has_seen('cap_imp', 1::bigint, g::bigint)) AS uncapped_takes_all FROM generate_series(3501, 4500) g;

-- A table tracked with a predicate folds through its SQL trigger: the same cap.
CREATE TABLE cap_where (user_id bigint, post_id bigint, kind text, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('cap_where', 'user_id', 'post_id', 'seen_at', "where" => $$kind = 'view'$$) IS NOT NULL AS tracked;
SELECT seen_bloom.set_user_cap('cap_where', 300);
INSERT INTO cap_where (user_id, post_id, kind) SELECT 1, g, 'view' FROM generate_series(1, 3000) g;
SELECT count(*) FILTER (WHERE seen_bloom.has_seen('cap_where', 1::bigint, g::bigint)) BETWEEN 270 AND 330 AS where_near_cap
FROM generate_series(1, 3000) g;

-- Refusals: out of range (22023), NULL table (22004), not tracked (55000), a retrack under
-- way (55006), not the owner (42501, also for a role that may insert), a direct edit of
-- seen_bloom.tracked (42501).
SELECT seen_bloom.set_user_cap('cap_imp', 0);
\echo :SQLSTATE
SELECT seen_bloom.set_user_cap('cap_imp', -1);
\echo :SQLSTATE
SELECT seen_bloom.set_user_cap('cap_imp', 1000000001);
\echo :SQLSTATE
SELECT seen_bloom.set_user_cap(NULL, 10);
\echo :SQLSTATE
CREATE TABLE cap_untracked (user_id bigint, post_id bigint);
SELECT seen_bloom.set_user_cap('cap_untracked', 10);
\echo :SQLSTATE
-- A retrack under way (its row in seen_bloom.retracking, forged here) would swap in the
-- settings it copied: the cap waits for it (55006).
INSERT INTO seen_bloom.retracking SELECT * FROM seen_bloom.tracked WHERE impressions = 'cap_imp'::regclass;
SELECT seen_bloom.set_user_cap('cap_imp', 10);
\echo :SQLSTATE
DELETE FROM seen_bloom.retracking WHERE impressions = 'cap_imp'::regclass;
DROP ROLE IF EXISTS sb_cap_app;
CREATE ROLE sb_cap_app;
GRANT INSERT, SELECT ON cap_imp TO sb_cap_app;
SET ROLE sb_cap_app;
SELECT seen_bloom.set_user_cap('cap_imp', 10);
\echo :SQLSTATE
UPDATE seen_bloom.tracked SET user_cap = 10 WHERE impressions = 'cap_imp'::regclass;
\echo :SQLSTATE
RESET ROLE;
SELECT user_cap IS NULL AS still_uncapped FROM seen_bloom.tracked WHERE impressions = 'cap_imp'::regclass;
REVOKE ALL ON cap_imp FROM sb_cap_app;
DROP ROLE sb_cap_app;
SELECT seen_bloom.untrack('cap_imp');
SELECT seen_bloom.untrack('cap_where');
DROP TABLE cap_imp, cap_where, cap_untracked;

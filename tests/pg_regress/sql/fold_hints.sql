-- The fold remembers where it left each filter row (where the row's HOT chain starts, as its
-- index entry points; checked before use) and fetches it from there instead of looking its
-- key up. Every way a remembered row can go stale must fall back to the primary key and
-- lose nothing: after each step, every committed impression is seen (no false negatives),
-- and the primary-key scans a fold adds (the backend's scan count before and after it) show
-- which path it took.

CREATE TABLE views (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('views', 'user_id', 'post_id', 'seen_at')::text AS filter_table;
-- 200 items of user 1 in the current generation: past the exact row, into layers.
INSERT INTO views (user_id, post_id) SELECT 1, g FROM generate_series(1, 200) g;
CREATE FUNCTION pkey_scans() RETURNS bigint LANGUAGE sql AS
$$ SELECT pg_stat_get_xact_numscans(indexrelid) FROM pg_index WHERE indrelid = 'views_seen'::regclass $$;
CREATE FUNCTION unseen_of_committed() RETURNS int LANGUAGE sql AS
$$ SELECT cardinality(seen_bloom.unseen('views', 1::bigint, ARRAY(SELECT post_id FROM views WHERE user_id = 1))) $$;

-- Remembered rows are fetched where they were left: no primary-key scan.
-- (In one transaction block: the backend does not flush its counts inside one.)
BEGIN;
SELECT pkey_scans() AS scans \gset
INSERT INTO views (user_id, post_id) VALUES (1, 201);
SELECT pkey_scans() - :scans AS pkey_scans_with_hints;
COMMIT;
SELECT unseen_of_committed() AS unseen;

-- 1. Versions written since by another writer (a plain UPDATE here; to the fold the same as
-- another backend folding this user): found along the chain from its start, no lookup.
UPDATE views_seen SET bits = bits WHERE user_key = 1;
BEGIN;
SELECT pkey_scans() AS scans \gset
INSERT INTO views (user_id, post_id) VALUES (1, 210);
SELECT pkey_scans() - :scans AS pkey_scans_after_other_writer;
COMMIT;
SELECT unseen_of_committed() AS unseen;

-- 2. A rolled-back fold: the versions it wrote were aborted (and the top it remembered may
-- not exist). From a chain's start the committed version is found again; a row that is not
-- there is looked up.
BEGIN;
INSERT INTO views (user_id, post_id) SELECT 1, g FROM generate_series(1001, 1100) g;
ROLLBACK;
INSERT INTO views (user_id, post_id) VALUES (1, 202);
SELECT unseen_of_committed() AS unseen,
       cardinality(seen_bloom.unseen('views', 1::bigint, ARRAY(SELECT g FROM generate_series(1001, 1100) g))) >= 95 AS rolled_back_mostly_unseen;

-- 3. A savepoint rolled back inside a transaction that commits.
BEGIN;
INSERT INTO views (user_id, post_id) VALUES (1, 203);
SAVEPOINT s;
INSERT INTO views (user_id, post_id) VALUES (1, 204);
ROLLBACK TO SAVEPOINT s;
INSERT INTO views (user_id, post_id) VALUES (1, 205);
COMMIT;
SELECT unseen_of_committed() AS unseen, seen_bloom.has_seen('views', 1::bigint, 205) AS seen_205;

-- 4. Rows deleted and written anew: a rebuild of the user.
CALL seen_bloom.rebuild('views', 1::bigint);
INSERT INTO views (user_id, post_id) VALUES (1, 206);
SELECT unseen_of_committed() AS unseen;

-- 5. The table rewritten (new files: the same TIDs may now hold other rows or none).
INSERT INTO views (user_id, post_id) SELECT 2, g FROM generate_series(1, 300) g;
VACUUM FULL views_seen;
INSERT INTO views (user_id, post_id) VALUES (1, 207), (2, 301);
SELECT unseen_of_committed() AS unseen,
       cardinality(seen_bloom.unseen('views', 2::bigint, ARRAY(SELECT post_id FROM views WHERE user_id = 2))) AS unseen_of_2;

-- 6. Remembered TIDs past the end of a table that VACUUM truncated.
DELETE FROM views_seen;
VACUUM views_seen;
SELECT pg_relation_size('views_seen') AS truncated_to;
INSERT INTO views (user_id, post_id) VALUES (1, 208), (2, 302);
SELECT seen_bloom.has_seen('views', 1::bigint, 208) AS seen_208, seen_bloom.has_seen('views', 2::bigint, 302) AS seen_302;
CALL seen_bloom.rebuild('views');
SELECT unseen_of_committed() AS unseen;

-- 7. TRUNCATE of the impressions empties the filters; folds after it start afresh.
TRUNCATE views;
INSERT INTO views (user_id, post_id) VALUES (1, 209);
SELECT seen_bloom.unseen('views', 1::bigint, ARRAY[1, 209]::bigint[]) AS after_truncate;

SELECT seen_bloom.untrack('views');
DROP TABLE views;
DROP FUNCTION pkey_scans();
DROP FUNCTION unseen_of_committed();

-- DDL on tracked tables (issue 16; README "Operating tracked tables"): renames are followed,
-- dropping or retyping a tracked column is refused, dropping the table drops its tracking,
-- partitions get triggers, and health() reports missing or disabled triggers.

CREATE SCHEMA feed;
CREATE TABLE feed.impressions (user_id bigint, post_id integer, seen_at timestamptz NOT NULL DEFAULT now(), kind text);
SELECT seen_bloom.track('feed.impressions', 'user_id', 'post_id', 'seen_at')::text AS filter_table;
INSERT INTO feed.impressions (user_id, post_id) VALUES (1, 10);
-- What track made is linked to what it was made for (pg_depend, AUTO): the filter table to the
-- table, each generated function (fold_row, truncate) to the filter table.
SELECT count(*) FILTER (WHERE d.classid = 'pg_class'::regclass) AS filter_table_links,
       count(*) FILTER (WHERE d.classid = 'pg_proc'::regclass) AS function_links
FROM pg_depend d
WHERE d.deptype = 'a' AND d.refclassid = 'pg_class'::regclass
  AND ((d.classid = 'pg_class'::regclass AND d.objid = 'feed.impressions_seen'::regclass AND d.refobjid = 'feed.impressions'::regclass)
       OR (d.classid = 'pg_proc'::regclass AND d.refobjid = 'feed.impressions_seen'::regclass));

-- Renames of the user, item and time columns, of the table and of its schema are followed.
ALTER TABLE feed.impressions RENAME COLUMN user_id TO uid;
ALTER TABLE feed.impressions RENAME COLUMN post_id TO item;
ALTER TABLE feed.impressions RENAME COLUMN seen_at TO at;
ALTER TABLE feed.impressions RENAME TO imps;
ALTER SCHEMA feed RENAME TO feeds;
SELECT user_column, item_column, time_column FROM seen_bloom.tracked WHERE impressions = 'feeds.imps'::regclass;
INSERT INTO feeds.imps (uid, item) VALUES (1, 11);
SELECT seen_bloom.unseen('feeds.imps', 1::bigint, ARRAY[10, 11, 12]::bigint[]) AS after_renames;
SELECT bloom_cardinality(seen_bloom.filter('feeds.imps', 1::bigint)) AS filter_after_renames;
CALL seen_bloom.rebuild('feeds.imps', 1::bigint);
SELECT seen_bloom.unseen('feeds.imps', 1::bigint, ARRAY[10, 11, 12]::bigint[]) AS after_rebuild;
CREATE SCHEMA other;
ALTER TABLE feeds.imps SET SCHEMA other;
INSERT INTO other.imps (uid, item) VALUES (1, 13);
SELECT seen_bloom.unseen('other.imps', 1::bigint, ARRAY[10, 13, 14]::bigint[]) AS after_set_schema;

-- Dropping or retyping a tracked column is refused; integer widths of the item may change,
-- and the time column may go between timestamptz and timestamp (read as UTC): followed, and
-- back.
ALTER TABLE other.imps DROP COLUMN uid;
\echo :SQLSTATE
ALTER TABLE other.imps DROP COLUMN at;
\echo :SQLSTATE
ALTER TABLE other.imps ALTER COLUMN uid TYPE text;
\echo :SQLSTATE
ALTER TABLE other.imps ALTER COLUMN at TYPE timestamp;
\echo :SQLSTATE
ALTER TABLE other.imps ALTER COLUMN at TYPE timestamptz;
\echo :SQLSTATE
ALTER TABLE other.imps ALTER COLUMN item TYPE text;
\echo :SQLSTATE
ALTER TABLE other.imps ALTER COLUMN item TYPE bigint;
SELECT item_type FROM seen_bloom.tracked WHERE impressions = 'other.imps'::regclass;
INSERT INTO other.imps (uid, item) VALUES (1, 5000000000);
SELECT seen_bloom.unseen('other.imps', 1::bigint, ARRAY[10, 5000000000, 15]::bigint[]) AS after_retype;
-- Other columns come and go freely.
ALTER TABLE other.imps DROP COLUMN kind;
ALTER TABLE other.imps ADD COLUMN weight real;

-- A where predicate: renaming a column it names is refused (42601 from the parse, as 0A000).
CREATE TABLE views (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now(), kind text);
SELECT seen_bloom.track('views', 'user_id', 'post_id', 'seen_at', "where" => 'kind = ''view''') IS NOT NULL AS tracked;
ALTER TABLE views RENAME COLUMN kind TO what;
\echo :SQLSTATE
ALTER TABLE views RENAME COLUMN post_id TO item;
INSERT INTO views (user_id, item, kind) VALUES (2, 20, 'view'), (2, 21, 'click');
SELECT seen_bloom.unseen('views', 2::bigint, ARRAY[20, 21]::bigint[]) AS predicate_after_rename;

-- DROP TABLE takes the tracking along (the filter table, its row in seen_bloom.tracked); the
-- same name can be tracked again. A filter table cannot be dropped on its own.
DROP TABLE feeds.impressions_seen;
\echo :SQLSTATE
DROP TABLE views;
SELECT count(*) AS rows_left FROM seen_bloom.tracked WHERE filter_table::text LIKE '%views_seen%';
SELECT to_regclass('views_seen') IS NULL AS filter_dropped;
CREATE TABLE views (user_id bigint, post_id bigint);
SELECT seen_bloom.track('views', 'user_id', 'post_id')::text AS tracked_again;
DROP SCHEMA other CASCADE;
SELECT count(*) AS imps_left FROM seen_bloom.tracked WHERE impressions::text LIKE '%imps%';
CREATE ROLE ddl_owner;
CREATE TABLE owned_imps (user_id bigint, post_id bigint);
SELECT seen_bloom.track('owned_imps', 'user_id', 'post_id')::text AS owned_tracked;
ALTER TABLE owned_imps OWNER TO ddl_owner;
DROP OWNED BY ddl_owner;
SELECT count(*) AS owned_left FROM seen_bloom.tracked WHERE impressions::text LIKE '%owned%';
SELECT to_regclass('owned_imps_seen') IS NULL AS owned_filter_dropped;
DROP ROLE ddl_owner;

-- Partitions: rows inserted through the parent or straight into a partition are folded; a
-- partition created or attached later gets the triggers, and an attached one's rows in the
-- window are folded; a detached one loses the triggers (its rows stay seen).
CREATE TABLE parted (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now()) PARTITION BY RANGE (user_id);
CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100);
SELECT seen_bloom.track('parted', 'user_id', 'post_id', 'seen_at') IS NOT NULL AS tracked;
CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (100) TO (200);
INSERT INTO parted (user_id, post_id) VALUES (1, 1), (150, 1);
INSERT INTO parted_low (user_id, post_id) VALUES (1, 2);
INSERT INTO parted_high (user_id, post_id) VALUES (150, 2);
CREATE TABLE parted_more (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
INSERT INTO parted_more VALUES (250, 1, now()), (250, 2, now() - interval '40 days');
ALTER TABLE parted ATTACH PARTITION parted_more FOR VALUES FROM (200) TO (300);
SELECT seen_bloom.unseen('parted', 1::bigint, ARRAY[1, 2, 3]::bigint[]) AS low,
       seen_bloom.unseen('parted', 150::bigint, ARRAY[1, 2, 3]::bigint[]) AS high,
       seen_bloom.unseen('parted', 250::bigint, ARRAY[1, 2, 3]::bigint[]) AS attached;
SELECT tgrelid::regclass AS partition, string_agg(tgname || ':' || tgenabled::text, ' ' ORDER BY tgname) AS triggers
FROM pg_trigger WHERE tgname LIKE 'seen_bloom%' AND tgrelid::regclass::text LIKE 'parted%' GROUP BY 1 ORDER BY 1;
ALTER TABLE parted DETACH PARTITION parted_more;
SELECT count(*) AS detached_triggers FROM pg_trigger WHERE tgrelid = 'parted_more'::regclass AND tgname LIKE 'seen_bloom%';
SELECT seen_bloom.unseen('parted', 250::bigint, ARRAY[1, 2, 3]::bigint[]) AS detached_stay_seen;

-- health(): nothing wrong, then a disabled trigger and a missing one, each with its fix.
SELECT * FROM seen_bloom.health();
ALTER TABLE views DISABLE TRIGGER ALL;
DROP TRIGGER seen_bloom_insert ON parted_high;
SELECT * FROM seen_bloom.health();
ALTER TABLE views ENABLE TRIGGER ALL;
-- ENABLE TRIGGER ALL made the replica trigger an ordinary one: health() says so, and its
-- function returns at once outside replication (the statement trigger folds the row).
SELECT * FROM seen_bloom.health();
INSERT INTO views (user_id, post_id) VALUES (900, 9001);
SELECT seen_bloom.has_seen('views', 900::bigint, 9001::bigint) AS folded;
ALTER TABLE views DISABLE TRIGGER seen_bloom_insert;
INSERT INTO views (user_id, post_id) VALUES (901, 9011);
SELECT seen_bloom.has_seen('views', 901::bigint, 9011::bigint) AS folded_by_the_row_trigger;
ALTER TABLE views ENABLE TRIGGER seen_bloom_insert;
ALTER TABLE views ENABLE REPLICA TRIGGER seen_bloom_replica;
SELECT seen_bloom.repair_triggers('parted');
SELECT * FROM seen_bloom.health();

-- VACUUM FULL and CLUSTER of a filter table while this session remembers where its rows were.
CREATE TABLE vac (user_id bigint, post_id bigint);
SELECT seen_bloom.track('vac', 'user_id', 'post_id') IS NOT NULL AS tracked;
INSERT INTO vac SELECT 1, g FROM generate_series(1, 500) g;
INSERT INTO vac SELECT u, g FROM generate_series(1, 3) u, generate_series(501, 600) g;
UPDATE vac SET post_id = post_id WHERE post_id <= 100;
VACUUM FULL vac_seen;
INSERT INTO vac SELECT u, g FROM generate_series(1, 3) u, generate_series(601, 700) g;
CLUSTER vac_seen USING vac_seen_pkey;
INSERT INTO vac SELECT u, g FROM generate_series(1, 3) u, generate_series(701, 800) g;
SELECT u, cardinality(seen_bloom.unseen('vac', u::bigint, ARRAY(SELECT post_id FROM vac WHERE user_id = u))) AS missed
FROM generate_series(1, 3) u ORDER BY 1;

-- untrack of a partitioned table whose partition is older than it (its OID sorts first):
-- the parent's row trigger is dropped before its clones.
CREATE TABLE early (user_id bigint, post_id bigint);
CREATE TABLE parted2 (user_id bigint, post_id bigint) PARTITION BY RANGE (user_id);
ALTER TABLE parted2 ATTACH PARTITION early FOR VALUES FROM (0) TO (100);
SELECT seen_bloom.track('parted2', 'user_id', 'post_id') IS NOT NULL AS tracked;
SELECT seen_bloom.untrack('parted2');
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgname LIKE 'seen_bloom%' AND tgrelid IN ('parted2'::regclass, 'early'::regclass);
DROP TABLE parted2;

-- Leave nothing behind for the tests after this one.
DROP TABLE views, parted, parted_more, vac;
DROP SCHEMA feeds CASCADE;
SELECT count(*) AS tracked_left FROM seen_bloom.tracked WHERE impressions::text ~ '^(views|parted|vac)';

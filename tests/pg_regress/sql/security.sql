-- Privileges of impression tracking, and hostile objects in a searched schema.
-- Extends tracking.sql (which has the basic INSERT-only role, a hostile now() and = over
-- bigint with public searched first); docs/SECURITY.md describes the model.
-- Every refusal shows its SQLSTATE; a hostile function RAISEs, so a call would show.

-- Only the table's owner (or a member of the owning role) may track it: another role gets
-- 42501. The owner needs no grant: seen_bloom.tracked is written by track and untrack only,
-- and a direct write of it is refused (42501).
DROP ROLE IF EXISTS sb_sec_owner;
DROP ROLE IF EXISTS sb_sec_app;
DROP ROLE IF EXISTS sb_sec_reader;
DROP ROLE IF EXISTS sb_sec_hostile;
CREATE ROLE sb_sec_owner;
CREATE ROLE sb_sec_app;
CREATE ROLE sb_sec_reader;
CREATE ROLE sb_sec_hostile;
CREATE SCHEMA feed AUTHORIZATION sb_sec_owner;
SET ROLE sb_sec_owner;
CREATE TABLE feed.impressions (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
GRANT USAGE ON SCHEMA feed TO sb_sec_hostile;
SET ROLE sb_sec_hostile;
SELECT seen_bloom.track('feed.impressions', 'user_id', 'post_id', 'seen_at');
\echo :SQLSTATE
SET ROLE sb_sec_owner;
INSERT INTO seen_bloom.tracked SELECT * FROM seen_bloom.tracked;
\echo :SQLSTATE
SELECT seen_bloom.track('feed.impressions', 'user_id', 'post_id', 'seen_at') AS filter_table;
SELECT pg_get_userbyid(relowner) AS filter_table_owner FROM pg_class WHERE oid = 'feed.impressions_seen'::regclass;
-- Every trigger function on the table is either the extension's own C trigger or a
-- SECURITY DEFINER function with a pinned search_path, owned by the owner that tracked, and
-- the filter table is closed to PUBLIC.
SELECT count(*) AS triggers,
       bool_and((p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'c') AND p.pronamespace = 'seen_bloom'::regnamespace)
                OR (p.prosecdef AND p.proconfig = ARRAY['search_path=pg_catalog, pg_temp']
                    AND p.proowner = 'sb_sec_owner'::regrole AND NOT has_function_privilege('public', p.oid, 'EXECUTE'))) AS all_pinned
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid = 'feed.impressions'::regclass AND NOT t.tgisinternal;
SELECT has_table_privilege('public', 'feed.impressions_seen', 'SELECT') AS public_can_read_filters;
-- Calls every trigger function of a table directly; true when each one is refused (not
-- permitted, or callable only as a trigger: any error).
RESET ROLE;
CREATE FUNCTION public.trigger_functions_refused(rel regclass) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    f regprocedure;
    refused boolean := true;
BEGIN
    FOR f IN SELECT t.tgfoid::regprocedure FROM pg_trigger t WHERE t.tgrelid = rel AND NOT t.tgisinternal LOOP
        BEGIN
            EXECUTE format('SELECT %s()', f::regproc);
            refused := false;
        EXCEPTION WHEN OTHERS THEN
            NULL;
        END;
    END LOOP;
    RETURN refused;
END $$;
SET ROLE sb_sec_owner;
GRANT USAGE ON SCHEMA feed TO sb_sec_app, sb_sec_reader, sb_sec_hostile;
GRANT INSERT ON feed.impressions TO sb_sec_app;
GRANT SELECT ON feed.impressions_seen TO sb_sec_reader;
-- New settings take the owner's privileges: a role that may insert (and so sees the
-- configuration row) gets 42501, one without any right 55000 (the row is hidden from it).
SET ROLE sb_sec_app;
CALL seen_bloom.retrack('feed.impressions', "window" => '1 day');
\echo :SQLSTATE
SET ROLE sb_sec_hostile;
CALL seen_bloom.retrack('feed.impressions', "window" => '1 day');
\echo :SQLSTATE
-- The owner, an ordinary role, may: the new filter table is its own, keeps the old one's
-- name and its grants (the reader's SELECT), and the app's inserts are folded into it.
SET ROLE sb_sec_owner;
CALL seen_bloom.retrack('feed.impressions');
SELECT c.relname, pg_get_userbyid(c.relowner) AS owner,
       has_table_privilege('sb_sec_reader', c.oid, 'SELECT') AS reader_may_select,
       has_table_privilege('sb_sec_app', c.oid, 'SELECT') AS app_may_select
FROM seen_bloom.tracked t JOIN pg_class c ON c.oid = t.filter_table WHERE t.impressions = 'feed.impressions'::regclass;
RESET ROLE;

-- The application role may only INSERT impressions: they are folded in all the same.
SET ROLE sb_sec_app;
INSERT INTO feed.impressions (user_id, post_id) VALUES (1, 101), (1, 102), (2, 201);
-- It can neither read nor write any filter row, directly or through the helpers.
SELECT count(*) FROM feed.impressions_seen;
\echo :SQLSTATE
UPDATE feed.impressions_seen SET bits = '\x';
\echo :SQLSTATE
DELETE FROM feed.impressions_seen;
\echo :SQLSTATE
INSERT INTO feed.impressions_seen VALUES (3, 0, -1, 0, '\x0000000000000000');
\echo :SQLSTATE
TRUNCATE feed.impressions_seen;
\echo :SQLSTATE
SELECT public.trigger_functions_refused('feed.impressions') AS trigger_functions_refused;
SELECT seen_bloom._fold('feed.impressions_seen', 0.01 / 6, ARRAY[3]::bigint[], ARRAY[1], ARRAY[1]::bigint[]);
\echo :SQLSTATE
SELECT seen_bloom._fold('feed.impressions_seen', 0.01 / 6, 2, ARRAY[3]::bigint[], ARRAY[1], ARRAY[1]::bigint[]);
\echo :SQLSTATE
-- _lock_users of more than 256 users locks the filter table (SHARE ROW EXCLUSIVE), which asks
-- for the privileges LOCK TABLE would; for a few users it first holds off the table's folds at
-- commit, which asks for UPDATE or DELETE on it: this role has neither (42501 both times).
SELECT seen_bloom._lock_users('feed.impressions_seen', ARRAY(SELECT generate_series(1, 300)::bigint));
\echo :SQLSTATE
SELECT seen_bloom._lock_users('feed.impressions_seen', ARRAY[1, 2]::bigint[]);
\echo :SQLSTATE
SELECT seen_bloom.has_seen('feed.impressions', 1::bigint, 101);
\echo :SQLSTATE
SELECT seen_bloom.filter('feed.impressions', 1::bigint);
\echo :SQLSTATE
SELECT * FROM seen_bloom.stats('feed.impressions');
\echo :SQLSTATE
SELECT seen_bloom.expire('feed.impressions');
\echo :SQLSTATE
CALL seen_bloom.rebuild('feed.impressions', 1::bigint);
\echo :SQLSTATE
SELECT seen_bloom.untrack('feed.impressions');
\echo :SQLSTATE
-- Nor can it rewrite the tracking configuration (say, point the filter table elsewhere).
UPDATE seen_bloom.tracked SET filter_table = 'pg_class';
\echo :SQLSTATE
DELETE FROM seen_bloom.tracked;
\echo :SQLSTATE
INSERT INTO seen_bloom.tracked SELECT * FROM seen_bloom.tracked;
\echo :SQLSTATE
RESET ROLE;

-- The feed's reading role, granted SELECT on the filter table, reads; it cannot write.
SET ROLE sb_sec_reader;
SELECT seen_bloom.unseen('feed.impressions', 1::bigint, ARRAY[101, 103, 102, 104]::bigint[]) AS unseen_of_1,
       seen_bloom.has_seen('feed.impressions', 2::bigint, 201) AS two_saw_201;
UPDATE feed.impressions_seen SET bits = bits;
\echo :SQLSTATE
SELECT seen_bloom._fold('feed.impressions_seen', 0.01 / 6, ARRAY[3]::bigint[], ARRAY[1], ARRAY[1]::bigint[]);
\echo :SQLSTATE
SELECT seen_bloom._fold('feed.impressions_seen', 0.01 / 6, 2, ARRAY[3]::bigint[], ARRAY[1], ARRAY[1]::bigint[]);
\echo :SQLSTATE
RESET ROLE;

-- A hostile role that may create objects in public (the default before PostgreSQL 15) plants
-- look-alikes of everything the trigger and the read path use, each raising if called:
-- functions, an aggregate, operators over the exact argument types used, and functions named
-- like the extension's internal helpers.
GRANT CREATE ON SCHEMA public TO sb_sec_hostile;
SET ROLE sb_sec_hostile;
CREATE FUNCTION public.hijacked() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'hostile object called as %', current_user; END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE FUNCTION public.hashint8(bigint) RETURNS int LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE FUNCTION public.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); END $$;
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); END $$;
CREATE FUNCTION public.array_position(tid[], tid) RETURNS int LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 1; END $$;
CREATE FUNCTION public.date_part(text, timestamptz) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE FUNCTION public.floor(float8) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE FUNCTION public.hostile_step(bigint[], bigint) RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE AGGREGATE public.array_agg(bigint) (SFUNC = public.hostile_step, STYPE = bigint[]);
CREATE FUNCTION public.hostile_count_step(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE AGGREGATE public.count(bigint) (SFUNC = public.hostile_count_step, STYPE = bigint);
CREATE FUNCTION public.hostile_eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RETURN public.hijacked(); END $$;
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.hostile_eq);
CREATE FUNCTION public.hostile_eq4(int, int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RETURN public.hijacked(); END $$;
CREATE OPERATOR public.= (LEFTARG = int, RIGHTARG = int, FUNCTION = public.hostile_eq4);
CREATE OPERATOR public.>= (LEFTARG = int, RIGHTARG = int, FUNCTION = public.hostile_eq4);
CREATE FUNCTION public.hostile_ge(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RETURN public.hijacked(); END $$;
CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.hostile_ge);
CREATE FUNCTION public.hostile_minus(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.hostile_minus);
CREATE FUNCTION public.item_hash(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE FUNCTION public.generation_of(timestamptz, bigint) RETURNS int LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE FUNCTION public._fold(regclass, float8, anyarray, int4[], int8[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); END $$;
CREATE FUNCTION public._fold(regclass, float8, int, anyarray, int4[], int8[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); END $$;
CREATE FUNCTION public._lock_users(regclass, anyarray) RETURNS void LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); END $$;
CREATE FUNCTION public._tracked(regclass) RETURNS seen_bloom.tracked LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
RESET ROLE;
-- The planted objects are really called when a query does not pin its names.
SET search_path = public, pg_catalog;
SELECT now();
\echo :SQLSTATE
SELECT 1::bigint = 1::bigint;
\echo :SQLSTATE

-- With public searched first, the trigger (as the INSERT-only role), the read path (as the
-- reader) and the owner's maintenance calls never reach them and answer right.
SET ROLE sb_sec_app;
SET search_path = public, pg_catalog;
INSERT INTO feed.impressions (user_id, post_id) VALUES (1, 103), (3, 301);
INSERT INTO feed.impressions (user_id, post_id) SELECT 4, g FROM generate_series(1, 200) g;
RESET ROLE;
-- The UPDATE trigger, fired by the owner with public searched first.
SET ROLE sb_sec_owner;
SET search_path = public, pg_catalog;
UPDATE feed.impressions SET post_id = 1301 WHERE user_id OPERATOR(pg_catalog.=) 3;
RESET ROLE;
SET ROLE sb_sec_reader;
SET search_path = public, pg_catalog;
SELECT seen_bloom.unseen('feed.impressions', 1::bigint, ARRAY[101, 103, 104]::bigint[]) AS unseen_of_1,
       seen_bloom.has_seen('feed.impressions', 3::bigint, 301) AS three_saw_301,
       seen_bloom.has_seen('feed.impressions', 3::bigint, 1301) AS three_saw_1301_by_update,
       seen_bloom.has_seen('feed.impressions', 3::bigint, 101) AS three_saw_101,
       cardinality(seen_bloom.unseen('feed.impressions', 4::bigint, ARRAY(SELECT g::bigint FROM generate_series(1, 200) g))) AS unseen_of_4_of_its_200;
RESET ROLE;
-- The same under the default search_path.
RESET search_path;
SET ROLE sb_sec_app;
INSERT INTO feed.impressions (user_id, post_id) VALUES (5, 501);
RESET ROLE;
SET ROLE sb_sec_reader;
SELECT seen_bloom.unseen('feed.impressions', 5::bigint, ARRAY[500, 501]::bigint[]) AS unseen_of_5;
RESET ROLE;
SET ROLE sb_sec_owner;
SET search_path = public, pg_catalog;
SELECT users, saturated_generations FROM seen_bloom.stats('feed.impressions');
SELECT seen_bloom.expire('feed.impressions') AS expired;
SELECT bloom_contains(seen_bloom.filter('feed.impressions', 4::bigint), ARRAY[1, 200, 201]::bigint[]) AS filter_of_4;
-- TRUNCATE goes through the SECURITY DEFINER truncate trigger.
CREATE TABLE feed.other (u bigint, i int);
SELECT seen_bloom.track('feed.other', 'u', 'i') AS filter_table;
INSERT INTO feed.other VALUES (1, 1);
TRUNCATE feed.other;
SELECT count(*) AS rows_after_truncate FROM feed.other_seen;
SELECT seen_bloom.untrack('feed.other');
RESET ROLE;
RESET search_path;

-- Overloads that are better matches than pg_catalog's for an unqualified call: format(text,
-- regclass) beats format(text, VARIADIC "any"), / (float8, bigint) beats / (float8, float8), and
-- bloom_agg / bloom_empty overloads in the extension's schema (public here) for the argument
-- types an unqualified splice would give (integer and numeric literals, an integer item).
SET ROLE sb_sec_hostile;
CREATE FUNCTION public.format(text, regclass) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE FUNCTION public.hostile_div(float8, bigint) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN 0; END $$;
CREATE OPERATOR public./ (LEFTARG = float8, RIGHTARG = bigint, FUNCTION = public.hostile_div);
CREATE FUNCTION public.hostile_agg_step(bigint[], bigint, integer, numeric) RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE AGGREGATE public.bloom_agg(bigint, integer, numeric) (SFUNC = public.hostile_agg_step, STYPE = bigint[]);
CREATE FUNCTION public.hostile_agg_step4(bigint[], integer, bigint, float8) RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
CREATE AGGREGATE public.bloom_agg(integer, bigint, float8) (SFUNC = public.hostile_agg_step4, STYPE = bigint[]);
CREATE FUNCTION public.bloom_empty(bigint, float8) RETURNS bloom LANGUAGE plpgsql AS $$
BEGIN PERFORM public.hijacked(); RETURN NULL; END $$;
RESET ROLE;
-- They do fire for an unqualified call.
SELECT format('%s', 'feed.impressions'::regclass);
\echo :SQLSTATE
SELECT 1::float8 / 2::bigint;
\echo :SQLSTATE
-- generation_of called directly, with public searched first.
SET search_path = public, pg_catalog;
SELECT seen_bloom.generation_of('2000-01-02 00:00:00+00', 86400) AS generation_of_2000_01_02;
RESET search_path;
-- rebuild (both forms) by the owner under the default search_path and with public first:
-- nothing planted is called and the filters answer as before.
SET ROLE sb_sec_owner;
CALL seen_bloom.rebuild('feed.impressions', 1::bigint);
CALL seen_bloom.rebuild('feed.impressions');
SET search_path = public, pg_catalog;
CALL seen_bloom.rebuild('feed.impressions', 4::bigint);
CALL seen_bloom.rebuild('feed.impressions');
SHOW search_path;
SELECT seen_bloom.unseen('feed.impressions', 1::bigint, ARRAY[101, 103, 104]::bigint[]) AS unseen_of_1,
       seen_bloom.has_seen('feed.impressions', 3::bigint, 1301) AS three_saw_1301,
       cardinality(seen_bloom.unseen('feed.impressions', 4::bigint, ARRAY(SELECT g::bigint FROM generate_series(1, 200) g))) AS unseen_of_4_of_its_200;
-- filter() with bigint items, and with integer items and no impressions (bloom_empty).
SELECT bloom_contains(seen_bloom.filter('feed.impressions', 4::bigint), ARRAY[1, 200, 201]::bigint[]) AS filter_of_4;
CREATE TABLE feed.ints (u bigint, i int);
SELECT seen_bloom.track('feed.ints', 'u', 'i') AS filter_table;
INSERT INTO feed.ints VALUES (1, 7), (1, 8);
SELECT bloom_contains(seen_bloom.filter('feed.ints', 1::bigint), ARRAY[7, 8, 9]) AS filter_of_ints,
       bloom_cardinality(seen_bloom.filter('feed.ints', 2::bigint)) AS empty_filter;
CALL seen_bloom.rebuild('feed.ints');
SELECT seen_bloom.unseen('feed.ints', 1::bigint, ARRAY[7, 8, 9]) AS unseen_ints_after_rebuild;
SELECT seen_bloom.untrack('feed.ints');
RESET search_path;
RESET ROLE;

-- The maintenance lock (expire, compact and the background worker hold it): only the table's
-- owner may take it (42501), or a hostile role could stall the table's maintenance; the
-- worker's own functions are not PUBLIC's (42501); another role sees no row of the owner's
-- tables in seen_bloom.maintenance.
SET ROLE sb_sec_hostile;
SELECT seen_bloom._maintenance_lock('feed.impressions', false);
\echo :SQLSTATE
SELECT seen_bloom._maintain('feed.impressions', 'begin', NULL);
\echo :SQLSTATE
SELECT count(*) FROM seen_bloom._maintenance_due();
\echo :SQLSTATE
RESET ROLE;
INSERT INTO seen_bloom.maintenance (impressions, runs) VALUES ('feed.impressions', 1);
SET ROLE sb_sec_hostile;
SELECT count(*) AS maintenance_rows_seen_by_another_role FROM seen_bloom.maintenance;
SET ROLE sb_sec_owner;
SELECT count(*) AS maintenance_rows_seen_by_the_owner FROM seen_bloom.maintenance;
SELECT seen_bloom._maintenance_lock('feed.impressions', false) AS owner_locks;
SELECT count(*) AS held FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 6 AND pid = pg_backend_pid();
SELECT seen_bloom._maintenance_unlock('feed.impressions');
SELECT count(*) AS held_after_unlock FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 6 AND pid = pg_backend_pid();
RESET ROLE;
DELETE FROM seen_bloom.maintenance;

-- Clean up.
DROP FUNCTION public.trigger_functions_refused(regclass);
DROP OWNED BY sb_sec_hostile;
SET ROLE sb_sec_owner;
SELECT seen_bloom.untrack('feed.impressions');
RESET ROLE;
DROP SCHEMA feed CASCADE;
REVOKE ALL ON seen_bloom.tracked FROM sb_sec_owner;
DROP OWNED BY sb_sec_app;
DROP OWNED BY sb_sec_reader;
DROP ROLE sb_sec_owner;
DROP ROLE sb_sec_app;
DROP ROLE sb_sec_reader;
DROP ROLE sb_sec_hostile;

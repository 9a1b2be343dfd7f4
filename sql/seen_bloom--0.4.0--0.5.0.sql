-- seen_bloom 0.4.0 -> 0.5.0 (ALTER EXTENSION seen_bloom UPDATE).
\echo Use "ALTER EXTENSION seen_bloom UPDATE TO '0.5.0'" to load this file. \quit
--
-- Every change to the SQL objects made after 0.4.0 is repeated here, so that an updated
-- database ends with the same objects as a fresh CREATE EXTENSION at 0.5.0;
-- tests/integration/upgrade.sh compares the two catalogues. scripts/gen_upgrade.py writes the
-- part between the two markers from sql/tracking.sql, sql/citus.sql and sql/activity.sql.
--
-- Changes since 0.4.0 (CHANGELOG.md): the ownership model of docs/SECURITY.md. Everything
-- done for a tracked table runs as its owner (seen_bloom._as_owner); seen_bloom.tracked is
-- written only by seen_bloom._write_tracked and shows each role the rows of its tables; the
-- event triggers run as the role whose DDL fired them; the filter table and the generated
-- functions belong to the table's owner (the tail below gives them to it).

-- _fold_query takes the slices of track's backfill as an argument (it rewrote its own text).
DROP FUNCTION seen_bloom._fold_query(seen_bloom.tracked, text, text);

-- A role sees the rows of the tables it has a right on.
ALTER TABLE seen_bloom.tracked ENABLE ROW LEVEL SECURITY;
CREATE POLICY visible ON seen_bloom.tracked FOR SELECT USING (
    pg_catalog.has_table_privilege(impressions, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
    OR pg_catalog.has_table_privilege(filter_table, 'SELECT, TRIGGER')
    -- A dropped table's row, for the DROP's event trigger to remove.
    OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) impressions));

-- The per-user cap (seen_bloom.set_user_cap), before retracking copies the columns.
ALTER TABLE seen_bloom.tracked ADD COLUMN user_cap bigint;
COMMENT ON COLUMN seen_bloom.tracked.user_cap IS 'The per-user cap (seen_bloom.set_user_cap): the most items one user''s filter takes in per generation, the impressions past it kept in the table but not folded; NULL: no cap';

-- seen_bloom.activity shows the cap's counters: _activity takes how many counters it reads.
DROP VIEW seen_bloom.activity;
DROP FUNCTION seen_bloom._activity();

-- The settings seen_bloom.retrack is moving a table to, with the filter table it builds them in
-- (filter_table): a row per move under way, of seen_bloom.tracked's columns (a column added
-- there is added here), written by seen_bloom._write_tracked only.
CREATE TABLE seen_bloom.retracking (LIKE seen_bloom.tracked INCLUDING DEFAULTS, PRIMARY KEY (impressions));
COMMENT ON TABLE seen_bloom.retracking IS 'One row per tracked table that seen_bloom.retrack is moving to new settings: the settings, and the filter table it fills with them (written by seen_bloom.retrack)';
GRANT SELECT ON seen_bloom.retracking TO PUBLIC;
ALTER TABLE seen_bloom.retracking ENABLE ROW LEVEL SECURITY;
CREATE POLICY visible ON seen_bloom.retracking FOR SELECT USING (
    pg_catalog.has_table_privilege(impressions, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
    OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) impressions));

-- What the background maintenance worker (seen_bloom.maintenance = on, preloaded) did for
-- each tracked table: written by seen_bloom._maintain only, each role seeing its tables' rows.
CREATE TABLE seen_bloom.maintenance (
    impressions regclass PRIMARY KEY,
    runs bigint NOT NULL DEFAULT 0,
    last_run timestamptz,
    last_run_started timestamptz,
    last_generation int,
    rows_expired bigint NOT NULL DEFAULT 0,
    users_compacted bigint NOT NULL DEFAULT 0,
    seconds float8,
    last_error text,
    last_error_at timestamptz);
COMMENT ON TABLE seen_bloom.maintenance IS 'The background worker''s runs per tracked table: runs, the last run''s end, start and open generation, rows it expired and users it compacted, its seconds, the last error and when (written by the worker)';
GRANT SELECT ON seen_bloom.maintenance TO PUBLIC;
ALTER TABLE seen_bloom.maintenance ENABLE ROW LEVEL SECURITY;
CREATE POLICY visible ON seen_bloom.maintenance FOR SELECT USING (
    pg_catalog.has_table_privilege(impressions, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
    OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) impressions));

-- Helpers the generated triggers call.
CREATE OR REPLACE FUNCTION seen_bloom.item_hash(item bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'seen_bloom_item_hash_int8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION seen_bloom.item_hash(item text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'seen_bloom_item_hash_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION seen_bloom.item_hash(item bytea) RETURNS bigint
    AS 'MODULE_PATHNAME', 'seen_bloom_item_hash_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION seen_bloom.item_hash(item uuid) RETURNS bigint
    AS 'MODULE_PATHNAME', 'seen_bloom_item_hash_uuid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom.item_hash(bigint) IS 'The 64-bit hash an item is stored under (integers hash as the equal bigint)';
COMMENT ON FUNCTION seen_bloom.item_hash(text) IS 'The 64-bit hash an item is stored under (its UTF-8 bytes)';
COMMENT ON FUNCTION seen_bloom.item_hash(bytea) IS 'The 64-bit hash an item is stored under (its bytes)';
COMMENT ON FUNCTION seen_bloom.item_hash(uuid) IS 'The 64-bit hash an item is stored under (its 16 bytes)';

-- Generations and the window (src/generations.rs: the one definition the C trigger, the read
-- path and these share). The window ends at `at`; it starts at at - window, computed as
-- timestamptz - interval is, in the session's time zone.
CREATE OR REPLACE FUNCTION seen_bloom.generation_of(t timestamptz, generation_seconds bigint) RETURNS int
    AS 'MODULE_PATHNAME', 'seen_bloom_generation_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom.generation_of(timestamptz, bigint) IS 'The generation (time bucket) a moment belongs to: whole generation_seconds since the Unix epoch (NULL for infinity or past int4)';
CREATE OR REPLACE FUNCTION seen_bloom._live_generation(t timestamptz, at timestamptz, "window" interval, generation_seconds bigint) RETURNS int
    AS 'MODULE_PATHNAME', 'seen_bloom__live_generation' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._live_generation(timestamptz, timestamptz, interval, bigint) IS
    'Internal: the generation an impression at t is folded into when the window ends at `at`, NULL when it is not kept (before the window, infinity)';
CREATE OR REPLACE FUNCTION seen_bloom._oldest_live_generation(at timestamptz, "window" interval, generation_seconds bigint) RETURNS int
    AS 'MODULE_PATHNAME', 'seen_bloom__oldest_live_generation' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._oldest_live_generation(timestamptz, interval, bigint) IS
    'Internal: the oldest generation reads use when the window ends at `at` (expire deletes older ones)';

CREATE OR REPLACE FUNCTION seen_bloom._fold(filter_table regclass, error_rate_per_generation float8, layout int,
                                 users anyarray, generations int4[], hashes int8[]) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__fold' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._fold(regclass, float8, int, anyarray, int4[], int8[]) IS
    'Internal: folds a batch of (user, generation, item hash) into a filter table of the given layout, with the caller''s privileges on it';
CREATE OR REPLACE FUNCTION seen_bloom._fold(filter_table regclass, error_rate_per_generation float8,
                                 users anyarray, generations int4[], hashes int8[]) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__fold' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._fold(regclass, float8, anyarray, int4[], int8[]) IS
    'Internal: folds into a filter table of layout 1 (called by the fold functions of tables tracked before 0.3.0 with a where predicate)';
CREATE OR REPLACE FUNCTION seen_bloom._fold_trigger() RETURNS trigger
    AS 'MODULE_PATHNAME', 'seen_bloom__fold_trigger' LANGUAGE C;
COMMENT ON FUNCTION seen_bloom._fold_trigger() IS
    'Internal: the trigger of a table tracked without a where predicate; folds each statement''s new rows as the filter table''s owner';
CREATE OR REPLACE FUNCTION seen_bloom._lock_users(filter_table regclass, users anyarray) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__lock_users' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._lock_users(regclass, anyarray) IS
    'Internal: waits for the table''s folds at commit and takes the advisory locks the trigger''s fold takes for these users (rebuild, compact and relayout call it before replacing their rows)';
CREATE OR REPLACE FUNCTION seen_bloom._exclude_commit_folds(filter_table regclass, excluded boolean) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__exclude_commit_folds' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._exclude_commit_folds(regclass, boolean) IS
    'Internal: with true, waits for the table''s folds at commit and makes later ones take user locks until called with false (a session lock; relayout holds it while folds of layout 2 end)';
CREATE OR REPLACE FUNCTION seen_bloom._check_predicate(predicate text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom__check_predicate' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._check_predicate(text) IS 'Internal: refuses a where predicate that is not one boolean expression (42601)';
CREATE OR REPLACE FUNCTION seen_bloom._check_predicate(predicate text, impressions regclass) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom__check_predicate' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._check_predicate(text, regclass) IS 'Internal: refuses a where predicate that is not one boolean expression (42601) or does not parse against the table''s columns, without running it';
-- Who a table's work runs as (src/owner.rs): its owner, restricted and with the search_path
-- pinned; asked for only by a role that holds the owner's privileges (42501 otherwise).
CREATE OR REPLACE FUNCTION seen_bloom._as_owner(rel regclass, sql text) RETURNS text
    AS 'MODULE_PATHNAME', 'seen_bloom__as_owner' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION seen_bloom._as_owner(rel regclass, sql text, arg anyelement) RETURNS text
    AS 'MODULE_PATHNAME', 'seen_bloom__as_owner' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._as_owner(regclass, text) IS
    'Internal: runs one statement as the owner of rel (SECURITY_RESTRICTED_OPERATION, search_path pg_catalog, pg_temp), for a caller holding that owner''s privileges; returns the first value or the rows processed';
COMMENT ON FUNCTION seen_bloom._as_owner(regclass, text, anyelement) IS
    'Internal: runs one statement with $1 = arg as the owner of rel (SECURITY_RESTRICTED_OPERATION, search_path pg_catalog, pg_temp), for a caller holding that owner''s privileges; returns the first value or the rows processed';
CREATE OR REPLACE FUNCTION seen_bloom._check_owner(rel regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__check_owner' LANGUAGE C STABLE;
COMMENT ON FUNCTION seen_bloom._check_owner(regclass) IS 'Internal: 42501 unless the caller holds the privileges of the table''s owner';
CREATE OR REPLACE FUNCTION seen_bloom._depend_on(dependent_class regclass, dependent oid, referenced regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__depend_on' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION seen_bloom._depend_on(regclass, oid, regclass) IS
    'Internal: records that a relation or function made for a tracked table goes with a table (dropped with it), for a caller who may act as both owners';
-- Links what track made to what it was made for, in pg_depend (once): the filter table to the
-- tracked table, a generated function to the filter table. PostgreSQL drops them with it, and
-- untrack finds them there. Not on Citus, whose distributed tables carry their own links.
CREATE OR REPLACE FUNCTION seen_bloom._link(dependent_class regclass, dependent oid, referenced regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (seen_bloom._citus_table_of(referenced)).distributed IS NULL
       AND NOT EXISTS (SELECT 1 FROM pg_depend d
                       WHERE d.classid = dependent_class AND d.objid = dependent AND d.objsubid = 0
                         AND d.refclassid = 'pg_class'::regclass AND d.refobjid = referenced AND d.deptype = 'a') THEN
        PERFORM seen_bloom._depend_on(dependent_class, dependent, referenced);
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._link(regclass, oid, regclass) IS 'Internal: records (once) that an object made for a tracked table goes with a table';
CREATE OR REPLACE FUNCTION seen_bloom._depend_on_extension(filter_table regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__depend_on_extension' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION seen_bloom._depend_on_extension(regclass) IS
    'Internal: records that a filter table depends on the extension (DROP EXTENSION refuses, or with CASCADE drops it), for a caller holding its owner''s privileges';
-- A filter table goes with the extension (DROP EXTENSION ... CASCADE), its generated functions
-- (linked to it) and the triggers that call them too: left behind, those would fail every
-- INSERT into the tracked table. Once; not on Citus.
CREATE OR REPLACE FUNCTION seen_bloom._link_extension(filter_table regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (seen_bloom._citus_table_of(filter_table)).distributed IS NULL
       AND NOT EXISTS (SELECT 1 FROM pg_depend d
                       WHERE d.classid = 'pg_class'::regclass AND d.objid = filter_table AND d.objsubid = 0
                         AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'n'
                         AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = 'seen_bloom')) THEN
        PERFORM seen_bloom._depend_on_extension(filter_table);
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._link_extension(regclass) IS 'Internal: records (once) that a filter table goes with the extension';
CREATE OR REPLACE FUNCTION seen_bloom._write_tracked(op text, t seen_bloom.tracked) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__write_tracked' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._write_tracked(text, seen_bloom.tracked) IS
    'Internal: the only writer of seen_bloom.tracked (insert, update or delete the row of t.impressions), for a caller holding the owner''s privileges of t.impressions, with a filter table of that owner';
CREATE OR REPLACE FUNCTION seen_bloom._null_time(impressions regclass, time_column name) RETURNS int
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'seen_bloom: an impression of % has a NULL % (its time column)', impressions, time_column
        USING ERRCODE = 'not_null_violation',
              HINT = format('Give the column a time: ALTER TABLE %s ALTER COLUMN %I SET DEFAULT now(), SET NOT NULL.', impressions, time_column);
END $$;
COMMENT ON FUNCTION seen_bloom._null_time(regclass, name) IS 'Internal: raises 23502 for an impression whose time is NULL (the fold refuses it rather than losing it)';
CREATE OR REPLACE FUNCTION seen_bloom._require_own_transaction(procedure text) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__require_own_transaction' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION seen_bloom._require_own_transaction(text) IS 'Internal: 2D000, with what to do instead, inside a transaction block (the procedures that commit after each batch of users)';
CREATE OR REPLACE FUNCTION seen_bloom._sized_layout(capacity bigint, generations int) RETURNS int
    AS 'MODULE_PATHNAME', 'seen_bloom__sized_layout' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._sized_layout(bigint, int) IS 'Internal: the layout number of a table tracked with this capacity and generations (1000 plus the items of a generation''s first layer)';
CREATE OR REPLACE FUNCTION seen_bloom._user_layout(layout int, marked boolean) RETURNS int
    AS 'MODULE_PATHNAME', 'seen_bloom__user_layout' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._user_layout(int, boolean) IS 'Internal: the layout a user''s rows are in, in a table of this layout, given whether the user has a marker row (layout 13: 3 if so, else 1)';
CREATE OR REPLACE FUNCTION seen_bloom._wait_for_snapshots() RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__wait_for_snapshots' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION seen_bloom._wait_for_snapshots() IS 'Internal: waits, without blocking anyone, until every transaction of the database that holds a snapshot now has ended (seen_bloom.relayout)';
CREATE OR REPLACE FUNCTION seen_bloom._layer_blocks(error_rate_per_generation float8, layer int, layout int) RETURNS bigint
    AS 'MODULE_PATHNAME', 'seen_bloom__layer_blocks' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._layer_blocks(float8, int, int) IS 'Internal: blocks in a generation layer of a tracked table of the given layout';
CREATE OR REPLACE FUNCTION seen_bloom._compacted(hashes bigint[], error_rate float8, oldest int, newest int) RETURNS bytea
    AS 'MODULE_PATHNAME', 'seen_bloom__compacted' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._compacted(bigint[], float8, int, int) IS 'Internal: a compacted filter in one row holding these item hashes at this error rate, from generations oldest to newest (tests)';
CREATE OR REPLACE FUNCTION seen_bloom._compacted_rows(hashes bigint[], error_rate float8, oldest int, newest int) RETURNS bytea[]
    AS 'MODULE_PATHNAME', 'seen_bloom__compacted_rows' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._compacted_rows(bigint[], float8, int, int) IS 'Internal: the rows of a compacted filter holding these item hashes at this error rate, from generations oldest to newest, one per part, row i to be segment i (seen_bloom.compact)';
CREATE OR REPLACE FUNCTION seen_bloom._compacted_oldest(bits bytea) RETURNS int
    AS 'MODULE_PATHNAME', 'seen_bloom__compacted_oldest' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._compacted_oldest(bytea) IS 'Internal: the oldest generation a compacted filter row''s items came from (read from its header)';
CREATE OR REPLACE FUNCTION seen_bloom._compacted_fpr(bits bytea) RETURNS float8
    AS 'MODULE_PATHNAME', 'seen_bloom__compacted_fpr' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._compacted_fpr(bytea) IS 'Internal: the modelled false-positive rate of a compacted filter row, blocks or static filter (seen_bloom.stats)';
CREATE OR REPLACE FUNCTION seen_bloom._segment_fpr(bits bytea) RETURNS float8
    AS 'MODULE_PATHNAME', 'seen_bloom__segment_fpr' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._segment_fpr(bytea) IS 'Internal: chance a fresh item is reported present by one filter row';
CREATE OR REPLACE FUNCTION seen_bloom._segment_fill(bits bytea) RETURNS float8
    AS 'MODULE_PATHNAME', 'seen_bloom__segment_fill' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._segment_fill(bytea) IS 'Internal: fraction of bits set in one filter row';
CREATE OR REPLACE FUNCTION seen_bloom._at_cap(error_rate_per_generation float8, layout int, user_cap bigint, layer int, bits bytea) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom__at_cap' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._at_cap(float8, int, bigint, int, bytea) IS 'Internal: whether a filter row shows its generation at the per-user cap, refusing new items (seen_bloom.health)';

-- The read path.
CREATE OR REPLACE FUNCTION seen_bloom.unseen(impressions regclass, "user" bigint, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'seen_bloom_unseen' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.unseen(impressions regclass, "user" text, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'seen_bloom_unseen' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.unseen(impressions regclass, "user" uuid, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'seen_bloom_unseen' LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom.unseen(regclass, bigint, anyarray) IS
    'The candidates the user has not seen within the tracked window, in order, without repeats and NULLs (bloom_unseen''s contract); a NULL user has seen nothing';
COMMENT ON FUNCTION seen_bloom.unseen(regclass, text, anyarray) IS
    'The candidates the user has not seen within the tracked window, in order, without repeats and NULLs (bloom_unseen''s contract); a NULL user has seen nothing';
COMMENT ON FUNCTION seen_bloom.unseen(regclass, uuid, anyarray) IS
    'The candidates the user has not seen within the tracked window, in order, without repeats and NULLs (bloom_unseen''s contract); a NULL user has seen nothing';

CREATE OR REPLACE FUNCTION seen_bloom.has_seen(impressions regclass, "user" bigint, item anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom_has_seen' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.has_seen(impressions regclass, "user" text, item anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom_has_seen' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.has_seen(impressions regclass, "user" uuid, item anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom_has_seen' LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom.has_seen(regclass, bigint, anyelement) IS 'True if the user has probably seen the item within the tracked window; false for a NULL user (who has seen nothing, as in unseen), NULL for a NULL item';
COMMENT ON FUNCTION seen_bloom.has_seen(regclass, text, anyelement) IS 'True if the user has probably seen the item within the tracked window; false for a NULL user (who has seen nothing, as in unseen), NULL for a NULL item';
COMMENT ON FUNCTION seen_bloom.has_seen(regclass, uuid, anyelement) IS 'True if the user has probably seen the item within the tracked window; false for a NULL user (who has seen nothing, as in unseen), NULL for a NULL item';

-- Several tracked tables of the same user and item types at once (the impressions and a
-- served log, say): the candidates hashed once, an item seen in any table dropped. Not an
-- overload of unseen on regclass[]: that made unseen('impressions', ...) ambiguous (42725).
CREATE OR REPLACE FUNCTION seen_bloom.unseen_in(impressions regclass[], "user" bigint, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'seen_bloom_unseen_in' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.unseen_in(impressions regclass[], "user" text, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'seen_bloom_unseen_in' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.unseen_in(impressions regclass[], "user" uuid, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'seen_bloom_unseen_in' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.has_seen_in(impressions regclass[], "user" bigint, item anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom_has_seen_in' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.has_seen_in(impressions regclass[], "user" text, item anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom_has_seen_in' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE OR REPLACE FUNCTION seen_bloom.has_seen_in(impressions regclass[], "user" uuid, item anyelement) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom_has_seen_in' LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom.unseen_in(regclass[], bigint, anyarray) IS
    'The candidates the user has seen in none of the tracked tables within their windows, in order, without repeats and NULLs; a NULL user has seen nothing';
COMMENT ON FUNCTION seen_bloom.unseen_in(regclass[], text, anyarray) IS
    'The candidates the user has seen in none of the tracked tables within their windows, in order, without repeats and NULLs; a NULL user has seen nothing';
COMMENT ON FUNCTION seen_bloom.unseen_in(regclass[], uuid, anyarray) IS
    'The candidates the user has seen in none of the tracked tables within their windows, in order, without repeats and NULLs; a NULL user has seen nothing';
COMMENT ON FUNCTION seen_bloom.has_seen_in(regclass[], bigint, anyelement) IS 'True if the user has probably seen the item in any of the tracked tables within their windows; false for a NULL user, NULL for a NULL item';
COMMENT ON FUNCTION seen_bloom.has_seen_in(regclass[], text, anyelement) IS 'True if the user has probably seen the item in any of the tracked tables within their windows; false for a NULL user, NULL for a NULL item';
COMMENT ON FUNCTION seen_bloom.has_seen_in(regclass[], uuid, anyelement) IS 'True if the user has probably seen the item in any of the tracked tables within their windows; false for a NULL user, NULL for a NULL item';

-- The configuration of a tracked table, or 55000 when it is not tracked.
CREATE OR REPLACE FUNCTION seen_bloom._tracked(impressions regclass) RETURNS seen_bloom.tracked
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    IF impressions IS NULL THEN
        RAISE EXCEPTION 'the impressions table must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO t FROM seen_bloom.tracked x WHERE x.impressions = _tracked.impressions;
    IF NOT FOUND THEN
        -- A Citus worker keeps no row: a shard's configuration comes from its trigger.
        t := seen_bloom._citus_config(impressions);
    END IF;
    IF t.impressions IS NULL THEN
        RAISE EXCEPTION 'table % is not tracked by seen_bloom', impressions USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN t;
END $$;
COMMENT ON FUNCTION seen_bloom._tracked(regclass) IS 'Internal: the configuration of a tracked table, 55000 when it is not tracked, 22004 for NULL';

-- 42804 unless a user value has the type of the tracked user column (integers for bigint).
CREATE OR REPLACE FUNCTION seen_bloom._require_user_type(t seen_bloom.tracked, given regtype, caller text) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF given IS DISTINCT FROM t.user_type
       AND NOT (t.user_type = 'bigint'::regtype AND given IN ('integer'::regtype, 'smallint'::regtype))
       AND NOT (t.user_type = 'text'::regtype AND given = 'character varying'::regtype) THEN
        RAISE EXCEPTION '%: the user argument is %, but the users of % are %', caller, given, t.impressions, t.user_type
            USING ERRCODE = 'datatype_mismatch', HINT = format('Cast the user to %s.', t.user_type);
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._require_user_type(seen_bloom.tracked, regtype, text) IS 'Internal: raises 42804 unless a user argument has the type of the tracked user column';

-- The generated per-table trigger body: folds the rows of `source` (new_rows, or the
-- impressions table itself for backfill and rebuild) that count as impressions: the rows
-- seen_bloom._live_generation keeps (at or after the window's start, not infinity). The
-- statement also runs in rebuild, whose search_path the caller chooses, so every function,
-- operator and type in it is qualified.
-- An impression's time as timestamptz: a timestamp without time zone is read as UTC, as the C
-- trigger reads its value, whatever the session's TimeZone (overloads: the generated folds
-- stay right when the column is retyped between the two).
CREATE OR REPLACE FUNCTION seen_bloom._utc(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS 'SELECT $1';
CREATE OR REPLACE FUNCTION seen_bloom._utc(t timestamp) RETURNS timestamptz
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$SELECT pg_catalog.timezone('UTC'::pg_catalog.text, $1)$$;
COMMENT ON FUNCTION seen_bloom._utc(timestamptz) IS 'Internal: an impression''s time (a timestamptz as it is)';
COMMENT ON FUNCTION seen_bloom._utc(timestamp) IS 'Internal: an impression''s time (a timestamp without time zone read as UTC)';

-- whole_generations: an impression counts while its generation is live (what layered rows
-- keep: an item stays seen up to window + window / generations), not only while it is inside
-- the window itself. compact rebuilds with it, so that a compacted user answers as before;
-- the fold and rebuild take the window itself (an impression older than it is not folded).
CREATE OR REPLACE FUNCTION seen_bloom._window_items_query_of(t seen_bloom.tracked, source text, extra_condition text, whole_generations boolean)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    at_time text := CASE WHEN t.time_column IS NULL THEN 'pg_catalog.now()' ELSE format('seen_bloom._utc(n.%I)', t.time_column) END;
    gen text := CASE WHEN whole_generations
        THEN format('CASE WHEN seen_bloom.generation_of(%s, %s::pg_catalog.int8) OPERATOR(pg_catalog.>=) seen_bloom._oldest_live_generation(pg_catalog.now(), %L::pg_catalog.interval, %s::pg_catalog.int8)
                          THEN seen_bloom.generation_of(%s, %s::pg_catalog.int8) END',
                    at_time, t.generation_seconds, t."window", t.generation_seconds, at_time, t.generation_seconds)
        ELSE format('seen_bloom._live_generation(%s, pg_catalog.now(), %L::pg_catalog.interval, %s::pg_catalog.int8)',
                    at_time, t."window", t.generation_seconds) END;
BEGIN
    -- A NULL time raises 23502 in the select list, which only rows that pass the WHERE
    -- clause reach (the caller's outer WHERE s.gen IS NOT NULL is not pushed down: _null_time
    -- is volatile).
    RETURN format(
        'SELECT n.%I::%s AS u,
                CASE WHEN %s IS NULL THEN seen_bloom._null_time(%L::pg_catalog.regclass, %L)
                     ELSE %s END AS gen,
                seen_bloom.item_hash(n.%I) AS h,
                %s AS at
         FROM %s n
         WHERE n.%I IS NOT NULL AND n.%I IS NOT NULL
           AND (%s) AND (%s)',
        t.user_column, t.user_type, at_time, t.impressions, t.time_column, gen,
        t.item_column, at_time, source, t.user_column, t.item_column,
        coalesce(t."where", 'true'), extra_condition);
END $$;
COMMENT ON FUNCTION seen_bloom._window_items_query_of(seen_bloom.tracked, text, text, boolean) IS 'Internal: the query of (user u, generation gen, item hash h, time at) of a tracked table''s impressions in a source relation; gen is NULL outside the window, or with whole_generations outside the live generations';
CREATE OR REPLACE FUNCTION seen_bloom._window_items_query(t seen_bloom.tracked, source text, extra_condition text DEFAULT 'true')
RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT seen_bloom._window_items_query_of(t, source, extra_condition, false)
$$;
COMMENT ON FUNCTION seen_bloom._window_items_query(seen_bloom.tracked, text, text) IS 'Internal: the query of (user u, generation gen, item hash h, time at) of a tracked table''s impressions in a source relation; gen is NULL outside the window';

-- `slices`, when given, folds the rows in one call per value of that expression of u (track's
-- backfill: 64 slices of users).
CREATE OR REPLACE FUNCTION seen_bloom._fold_query(t seen_bloom.tracked, source text, extra_condition text DEFAULT 'true', slices text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN format(
        'SELECT seen_bloom._fold(%L::pg_catalog.regclass, %s::pg_catalog.float8, %s::pg_catalog.int4, pg_catalog.array_agg(u), pg_catalog.array_agg(gen), pg_catalog.array_agg(h))
         FROM (%s) s
         WHERE s.gen IS NOT NULL
         %s
         HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0',
        t.filter_table, t.error_rate_per_generation, t.layout,
        seen_bloom._window_items_query(t, source, extra_condition),
        CASE WHEN slices IS NULL THEN '' ELSE 'GROUP BY ' || slices END);
END $$;
COMMENT ON FUNCTION seen_bloom._fold_query(seen_bloom.tracked, text, text, text) IS 'Internal: the statement that folds impressions of a tracked table from a source relation (in slices of users when given)';

-- A name cut to at most `bytes` bytes, by whole characters (PostgreSQL truncates identifiers
-- to 63 bytes, not characters: every name made from a table's name leaves room for its suffix).
CREATE OR REPLACE FUNCTION seen_bloom._cut_to_bytes(name text, bytes int) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WHILE octet_length(name) > bytes LOOP
        name := left(name, -1);
    END LOOP;
    RETURN name;
END $$;
COMMENT ON FUNCTION seen_bloom._cut_to_bytes(text, int) IS 'Internal: a name cut by whole characters to at most this many bytes';

-- The names of a tracked table's generated trigger functions: <filter>_fold, <filter>_fold_row
-- and <filter>_truncate in the filter table's schema; where those would pass 63 bytes (and be
-- cut to the same name), a shortened name and a hash of the whole.
CREATE OR REPLACE FUNCTION seen_bloom._function_base(filter_name text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    base text := filter_name;
BEGIN
    IF octet_length(filter_name || '_truncate') > 63 THEN
        base := seen_bloom._cut_to_bytes(filter_name, 63 - 18) || '_' || left(md5(filter_name), 8);
    END IF;
    RETURN base;
END $$;
COMMENT ON FUNCTION seen_bloom._function_base(text) IS 'Internal: the name stem of a tracked table''s generated trigger functions';

-- A tracked table and its partitions, parents before children: a partitioned table's row
-- trigger is cloned onto its partitions, so it must be made, and dropped, on the parent
-- first. Only relations that exist (a dropped table's OID gives nothing).
CREATE OR REPLACE FUNCTION seen_bloom._tracked_relations(impressions regclass) RETURNS SETOF regclass
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.rel FROM (SELECT c.oid::regclass AS rel, 0 AS level FROM pg_class c WHERE c.oid = impressions
                       UNION ALL
                       SELECT p.relid, p.level FROM pg_partition_tree(impressions) p WHERE p.relid <> impressions) s
    ORDER BY s.level
$$;
COMMENT ON FUNCTION seen_bloom._tracked_relations(regclass) IS 'Internal: a tracked table and its partitions, parents first';

-- The tracking of a table: its own, or its partition tree's root's (pg_partition_ancestors
-- lists nothing for a table outside a partition tree); NULL when it has none.
CREATE OR REPLACE FUNCTION seen_bloom._tracking_of(rel oid) RETURNS seen_bloom.tracked
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT x.* FROM seen_bloom.tracked x
    WHERE x.impressions::oid = rel OR x.impressions::oid IN (SELECT a.relid FROM pg_partition_ancestors(rel) a)
    LIMIT 1
$$;
COMMENT ON FUNCTION seen_bloom._tracking_of(oid) IS 'Internal: the tracking configuration of a table or of its partition tree, NULL when none';

-- Drops the extension's triggers from one table.
CREATE OR REPLACE FUNCTION seen_bloom._drop_triggers(target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM seen_bloom._citus_allow_triggers(target);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_insert ON %s', target);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_update ON %s', target);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_truncate ON %s', target);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_replica ON %s', target);
END $$;
COMMENT ON FUNCTION seen_bloom._drop_triggers(regclass) IS 'Internal: drops the seen_bloom triggers of a table';
CREATE OR REPLACE FUNCTION seen_bloom._drop_next_triggers(target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_next_insert ON %s', target);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_next_update ON %s', target);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_next_truncate ON %s', target);
END $$;
COMMENT ON FUNCTION seen_bloom._drop_next_triggers(regclass) IS 'Internal: drops the triggers of a retrack from a table';

-- The generated trigger functions of a tracked table, made from its configuration by a
-- caller holding the owner's privileges (creating runs nothing), and given to the owner: they
-- run as the owner (SECURITY DEFINER), so a role that may only INSERT into the impressions
-- table still has its impressions folded in, and the `where` predicate and any cast in it run
-- with the owner's rights, never more. A function of the same name that belongs to another
-- role is never replaced (42710): nothing seen_bloom makes takes over another role's object.
--   <filter>_fold      the statement fold of a table tracked with a `where` predicate (without
--                      one it is seen_bloom._fold_trigger, in C);
--   <filter>_fold_row  rows that logical replication applies;
--   <filter>_truncate  empties the filter table.
CREATE OR REPLACE FUNCTION seen_bloom._create_functions(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    filter_schema name;
    base text;
    fold_function text;
    row_function text;
    truncate_function text;
    replicated seen_bloom.tracked := t;
    owner_role oid;
    taken regprocedure;
BEGIN
    PERFORM seen_bloom._check_owner(t.impressions);
    -- Citus creates the functions on the workers too, which it refuses after a parallel
    -- operation in the transaction: sequential mode first.
    PERFORM seen_bloom._citus_allow_triggers(t.impressions);
    -- A negative layout asks seen_bloom._fold for the in-place writes only (see below).
    replicated.layout := -t.layout;
    SELECT n.nspname, seen_bloom._function_base(c.relname) INTO filter_schema, base
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t.filter_table;
    SELECT c.relowner INTO owner_role FROM pg_class c WHERE c.oid = t.impressions;
    SELECT p.oid::regprocedure INTO taken FROM pg_proc p
    WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c WHERE c.oid = t.filter_table) AND p.pronargs = 0
      AND p.proname IN (base || '_fold', base || '_fold_row', base || '_truncate') AND p.proowner <> owner_role
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'seen_bloom: function % exists and belongs to %, not to %, the owner of %', taken,
                        pg_get_userbyid((SELECT p.proowner FROM pg_proc p WHERE p.oid = taken)), pg_get_userbyid(owner_role), t.impressions
            USING ERRCODE = 'duplicate_function',
                  HINT = 'Drop or rename that function, then track again (seen_bloom never replaces another role''s object).';
    END IF;
    row_function := format('%I.%I', filter_schema, base || '_fold_row');
    truncate_function := format('%I.%I', filter_schema, base || '_truncate');
    IF t."where" IS NOT NULL THEN
        fold_function := format('%I.%I', filter_schema, base || '_fold');
        EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                        SET search_path = pg_catalog, pg_temp AS %L',
                       fold_function, format('BEGIN PERFORM * FROM (%s) f; RETURN NULL; END', seen_bloom._fold_query(t, 'new_rows')));
        EXECUTE format('ALTER FUNCTION %s() OWNER TO %I', fold_function, pg_get_userbyid(owner_role));
        EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', fold_function);
        PERFORM seen_bloom._link('pg_proc', format('%s()', fold_function)::regprocedure, t.filter_table);
        EXECUTE format('COMMENT ON FUNCTION %s() IS %L', fold_function, format('seen_bloom: folds new impressions of %s into %s', t.impressions, t.filter_table));
    END IF;
    -- Only rows that logical replication applies (session_replication_role = replica): the
    -- trigger is enabled for replicas only, but `ENABLE TRIGGER USER` (or ALL) after a bulk
    -- load enables it for ordinary sessions too, where the statement trigger already folds.
    -- A subscription that also carries the filter table (FOR ALL TABLES) brings the
    -- publisher's filter row versions: the subscriber then leaves those to the publisher. In
    -- layout 3 it makes the in-place writes of layer rows, which logical decoding does not
    -- see, itself. The filter table is named, not numbered: a subscriber made from pg_dump
    -- has other OIDs.
    -- On Citus the trigger's copy on a shard is named seen_bloom_replica_<shard id>: there
    -- the rows come from a shard move or split, which copies the filter shard's rows too.
    EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS %L',
                   row_function, format('BEGIN
    IF pg_catalog.current_setting(''session_replication_role'') OPERATOR(pg_catalog.<>) ''replica''
       OR TG_NAME OPERATOR(pg_catalog.<>) ''seen_bloom_replica'' THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_subscription_rel r WHERE r.srrelid OPERATOR(pg_catalog.=) %L::pg_catalog.regclass::pg_catalog.oid) THEN
        %s
        RETURN NULL;
    END IF;
    PERFORM * FROM (%s) f;
    RETURN NULL;
END', t.filter_table,
       CASE WHEN t.layout >= 3 THEN format('PERFORM * FROM (%s) f;', seen_bloom._fold_query(replicated, '(SELECT (NEW).*)')) ELSE '' END,
       seen_bloom._fold_query(t, '(SELECT (NEW).*)')));
    EXECUTE format('ALTER FUNCTION %s() OWNER TO %I', row_function, pg_get_userbyid(owner_role));
    EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', row_function);
    PERFORM seen_bloom._link('pg_proc', format('%s()', row_function)::regprocedure, t.filter_table);
    EXECUTE format('COMMENT ON FUNCTION %s() IS %L', row_function, format('seen_bloom: folds rows that logical replication applies to %s into %s', t.impressions, t.filter_table));
    -- On Citus the trigger also fires on each impressions shard (as seen_bloom_truncate_<shard
    -- id>), after the distributed TRUNCATE of the filter table emptied its shards; truncating
    -- the distributed filter table from there would deadlock.
    EXECUTE format('CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS %L',
                   truncate_function, format('BEGIN
    IF TG_NAME OPERATOR(pg_catalog.=) ''seen_bloom_truncate'' THEN
        TRUNCATE %s;
    END IF;
    RETURN NULL;
END', t.filter_table));
    EXECUTE format('ALTER FUNCTION %s() OWNER TO %I', truncate_function, pg_get_userbyid(owner_role));
    EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', truncate_function);
    PERFORM seen_bloom._link('pg_proc', format('%s()', truncate_function)::regprocedure, t.filter_table);
    EXECUTE format('COMMENT ON FUNCTION %s() IS %L', truncate_function, format('seen_bloom: empties %s when %s is truncated', t.filter_table, t.impressions));
END $$;
COMMENT ON FUNCTION seen_bloom._create_functions(seen_bloom.tracked) IS
    'Internal: (re)creates the generated trigger functions of a tracked table and gives them to its owner, for a caller holding the owner''s privileges';

-- The triggers on `target` (the tracked table, or a partition of it) that call the generated
-- functions (made by a caller who may: creating a trigger runs nothing):
--   seen_bloom_insert, seen_bloom_update  AFTER, FOR EACH STATEMENT, over the new rows: the fold;
--   seen_bloom_truncate                   empties the filter table (the tracked table only);
--   seen_bloom_replica                    FOR EACH ROW, ENABLE REPLICA: rows that a logical
--                                         replication subscription applies (its workers run as
--                                         session_replication_role = replica, where the other
--                                         triggers do not fire, and fire row triggers only).
CREATE OR REPLACE FUNCTION seen_bloom._create_triggers(t seen_bloom.tracked, target regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    filter_schema name;
    base text;
    fold_function text := 'seen_bloom._fold_trigger';
    fold_arguments text := '';
BEGIN
    -- On a Citus distributed table the insert trigger carries the configuration to the
    -- workers (sql/citus.sql).
    IF seen_bloom._citus_allow_triggers(t.impressions) THEN
        fold_arguments := quote_literal(seen_bloom._citus_trigger_config(t));
    END IF;
    SELECT n.nspname, seen_bloom._function_base(c.relname) INTO filter_schema, base
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t.filter_table;
    IF t."where" IS NOT NULL THEN
        fold_function := format('%I.%I', filter_schema, base || '_fold');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = target AND g.tgname = 'seen_bloom_insert') THEN
        EXECUTE format('CREATE TRIGGER seen_bloom_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows
                        FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)', target, fold_function, fold_arguments);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = target AND g.tgname = 'seen_bloom_update') THEN
        EXECUTE format('CREATE TRIGGER seen_bloom_update AFTER UPDATE ON %s REFERENCING NEW TABLE AS new_rows
                        FOR EACH STATEMENT EXECUTE FUNCTION %s()', target, fold_function);
    END IF;
    -- A row trigger of a partitioned table is cloned onto its partitions (a clone's state
    -- follows the parent's only since PostgreSQL 15, hence the ALTER on each).
    IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = target AND g.tgname = 'seen_bloom_replica') THEN
        EXECUTE format('CREATE TRIGGER seen_bloom_replica AFTER INSERT OR UPDATE ON %s
                        FOR EACH ROW EXECUTE FUNCTION %s()', target, format('%I.%I', filter_schema, base || '_fold_row'));
    END IF;
    EXECUTE format('ALTER TABLE %s ENABLE REPLICA TRIGGER seen_bloom_replica', target);
    IF target = t.impressions AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = target AND g.tgname = 'seen_bloom_truncate') THEN
        EXECUTE format('CREATE TRIGGER seen_bloom_truncate AFTER TRUNCATE ON %s
                        FOR EACH STATEMENT EXECUTE FUNCTION %s()', target, format('%I.%I', filter_schema, base || '_truncate'));
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._create_triggers(seen_bloom.tracked, regclass) IS
    'Internal: creates the missing seen_bloom triggers on the tracked table or one of its partitions';

-- The generated functions and the triggers of a tracked table and its partitions, for a caller
-- holding the table owner's privileges.
CREATE OR REPLACE FUNCTION seen_bloom._make_tracking(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM seen_bloom._create_functions(t);
    -- (Again here for tables tracked before 0.5.0, or restored: pg_dump keeps no dependency.)
    PERFORM seen_bloom._link_extension(t.filter_table);
    -- Partitions too: statement triggers of a partitioned table do not fire for rows
    -- inserted into a partition directly, so each partition gets its own.
    PERFORM seen_bloom._create_triggers(t, r) FROM seen_bloom._tracked_relations(t.impressions) r;
END $$;
COMMENT ON FUNCTION seen_bloom._make_tracking(seen_bloom.tracked) IS
    'Internal: (re)creates the generated functions of a tracked table (given to its owner) and the missing triggers on it and its partitions';


-- A filter table (track, retrack), linked to the tracked table (dropped with it).
CREATE OR REPLACE FUNCTION seen_bloom._create_filter_table(impressions regclass, filter_table text, user_type regtype) RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Given to the table's owner (creating it runs nothing). Rows stay under 2 KB (at most
    -- 48 blocks of 32 bytes), inline and HOT-updatable.
    EXECUTE format('CREATE TABLE %s (user_key %s NOT NULL, generation pg_catalog.int4 NOT NULL, layer pg_catalog.int2 NOT NULL,
                    segment pg_catalog.int4 NOT NULL, bits pg_catalog.bytea NOT NULL,
                    PRIMARY KEY (user_key, generation, layer, segment)) WITH (fillfactor = 90)',
                   filter_table, user_type);
    EXECUTE format('ALTER TABLE %s ALTER COLUMN bits SET STORAGE MAIN', filter_table);
    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', filter_table);
    EXECUTE format('ALTER TABLE %s OWNER TO %I', filter_table, pg_get_userbyid((SELECT c.relowner FROM pg_class c WHERE c.oid = impressions)));
    EXECUTE format('COMMENT ON TABLE %s IS %L', filter_table,
                   format('seen_bloom filter rows of %s (maintained by triggers; read with seen_bloom.unseen)', impressions));

    PERFORM seen_bloom._link('pg_class', filter_table::regclass, impressions);
    IF (seen_bloom._citus_table_of(impressions)).distributed IS NULL THEN
        PERFORM seen_bloom._link_extension(filter_table::regclass);
    END IF;
    RETURN filter_table::regclass;
END $$;
COMMENT ON FUNCTION seen_bloom._create_filter_table(regclass, text, regtype) IS
    'Internal: creates a filter table for the tracked table, owned by its owner and dropped with it (track, retrack)';

-- A table's settings (track, retrack), checked, with what follows from them: the generation
-- length, each generation's share of the error rate, and the layout (3, or from 1000 on with
-- a capacity: a generation's first layer holds its share).
CREATE OR REPLACE FUNCTION seen_bloom._with_settings(t seen_bloom.tracked, "window" interval, capacity bigint,
                                          error_rate float8, generations int) RETURNS seen_bloom.tracked
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF "window" IS NULL OR "window" <= interval '0' THEN
        RAISE EXCEPTION 'window must be a positive interval, got %', "window" USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF capacity < 1 OR capacity > 1000000000 THEN
        RAISE EXCEPTION 'capacity must be between 1 and 1000000000, got %', capacity USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF error_rate IS NULL OR NOT (error_rate > 0 AND error_rate < 1) THEN
        RAISE EXCEPTION 'error_rate must be greater than 0 and less than 1, got %', error_rate
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The window's edge error is window / generations; each generation gets
    -- error_rate / (generations + 1) of the budget (docs/DESIGN.md, "Generations").
    IF generations IS NULL OR generations < 2 OR generations > 60 THEN
        RAISE EXCEPTION 'generations must be between 2 and 60, got %', generations USING ERRCODE = 'invalid_parameter_value';
    END IF;
    t."window" := "window";
    t.generations := generations;
    t.generation_seconds := ceil(extract(epoch FROM "window") / generations)::bigint;
    -- Without a capacity, filter()'s value is sized for 100,000 items, as before 0.5.0.
    t.capacity := coalesce(capacity, 100000);
    t.error_rate := error_rate;
    t.error_rate_per_generation := error_rate / (generations + 1);
    t.layout := CASE WHEN capacity IS NULL THEN 3 ELSE seen_bloom._sized_layout(capacity, generations) END;
    RETURN t;
END $$;
COMMENT ON FUNCTION seen_bloom._with_settings(seen_bloom.tracked, interval, bigint, float8, int) IS
    'Internal: a tracking configuration with these settings, checked (22023), and the generation length, error share and layout that follow (track, retrack)';

CREATE OR REPLACE FUNCTION seen_bloom.track(impressions regclass, user_column name, item_column name,
                                 time_column name DEFAULT NULL, "window" interval DEFAULT '30 days',
                                 capacity bigint DEFAULT NULL, error_rate float8 DEFAULT 0.01,
                                 "where" text DEFAULT NULL, generations int DEFAULT 5)
RETURNS regclass LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $track$
DECLARE
    rel record;
    user_type regtype;
    item_type regtype;
    time_type regtype;
    filter_name text;
    filter_table text;
    t seen_bloom.tracked;
    distributed boolean;
BEGIN
    IF impressions IS NULL OR user_column IS NULL OR item_column IS NULL THEN
        RAISE EXCEPTION 'seen_bloom.track: impressions, user_column and item_column must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Everything below runs for the table as its owner: only the owner may ask for it.
    PERFORM seen_bloom._check_owner(impressions);
    IF EXISTS (SELECT 1 FROM seen_bloom.tracked x WHERE x.impressions = track.impressions) THEN
        RAISE EXCEPTION 'table % is already tracked by seen_bloom', impressions
            USING ERRCODE = 'duplicate_object', HINT = 'Call seen_bloom.untrack first to track it again.';
    END IF;
    SELECT c.relname, n.nspname, c.relkind, c.relpersistence INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = impressions;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', impressions USING ERRCODE = 'wrong_object_type';
    END IF;
    -- A temporary table goes at the session's end without the DDL event triggers: its row
    -- would stay behind.
    IF rel.relpersistence = 't' THEN
        RAISE EXCEPTION 'seen_bloom.track: % is a temporary table', impressions USING ERRCODE = 'feature_not_supported';
    END IF;
    SELECT a.atttypid::regtype INTO user_type FROM pg_attribute a
    WHERE a.attrelid = impressions AND a.attname = user_column AND a.attnum > 0 AND NOT a.attisdropped;
    SELECT a.atttypid::regtype INTO item_type FROM pg_attribute a
    WHERE a.attrelid = impressions AND a.attname = item_column AND a.attnum > 0 AND NOT a.attisdropped;
    IF user_type IS NULL THEN
        RAISE EXCEPTION 'column "%" of % does not exist', user_column, impressions USING ERRCODE = 'undefined_column';
    END IF;
    IF item_type IS NULL THEN
        RAISE EXCEPTION 'column "%" of % does not exist', item_column, impressions USING ERRCODE = 'undefined_column';
    END IF;
    -- Integer users are kept as bigint, as reads take them (an integer argument is one).
    IF user_type = 'integer'::regtype THEN
        user_type := 'bigint'::regtype;
    END IF;
    IF user_type NOT IN ('bigint'::regtype, 'text'::regtype, 'uuid'::regtype) THEN
        RAISE EXCEPTION 'user column "%" is %, but must be bigint, integer, text or uuid', user_column, user_type
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Track a generated column of one of those types, e.g. ADD COLUMN user_key text GENERATED ALWAYS AS (user_column::text) STORED.';
    END IF;
    IF item_type NOT IN ('bigint'::regtype, 'integer'::regtype, 'text'::regtype, 'character varying'::regtype, 'uuid'::regtype) THEN
        RAISE EXCEPTION 'item column "%" is %, but must be bigint, integer, text, varchar or uuid', item_column, item_type
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Track a generated column of one of those types, e.g. ADD COLUMN item_key text GENERATED ALWAYS AS (item_column::text) STORED.';
    END IF;
    IF time_column IS NOT NULL THEN
        SELECT a.atttypid::regtype INTO time_type FROM pg_attribute a
        WHERE a.attrelid = impressions AND a.attname = time_column AND a.attnum > 0 AND NOT a.attisdropped;
        IF time_type IS NULL THEN
            RAISE EXCEPTION 'column "%" of % does not exist', time_column, impressions USING ERRCODE = 'undefined_column';
        END IF;
        IF time_type NOT IN ('timestamptz'::regtype, 'timestamp'::regtype) THEN
            RAISE EXCEPTION 'time column "%" is %, but must be timestamptz or timestamp (read as UTC)', time_column, time_type
                USING ERRCODE = 'datatype_mismatch';
        END IF;
    END IF;
    t := seen_bloom._with_settings(t, "window", capacity, error_rate, generations);
    IF "where" IS NOT NULL THEN
        -- One expression over the table's columns (it runs over new rows as n); parsed as
        -- the owner, since parsing may run a type's input function.
        PERFORM seen_bloom._as_owner(impressions, format('SELECT seen_bloom._check_predicate($1, %s::pg_catalog.oid)', impressions::oid), "where");
    END IF;
    distributed := (seen_bloom._citus_table_of(impressions)).distributed IS NOT NULL;
    IF distributed THEN
        PERFORM seen_bloom._citus_check_trackable(impressions, user_column, "where");
        -- Citus co-locates tables whose distribution columns have one type.
        IF EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = impressions AND a.attname = user_column
                   AND a.atttypid = 'integer'::regtype) THEN
            RAISE EXCEPTION 'seen_bloom.track: the user column of a Citus distributed table must be bigint, text or uuid, not integer'
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'ALTER TABLE ... ALTER COLUMN ... TYPE bigint before distributing it.';
        END IF;
    END IF;

    filter_name := seen_bloom._cut_to_bytes(rel.relname, 58) || '_seen';
    filter_table := format('%I.%I', rel.nspname, filter_name);
    IF to_regclass(filter_table) IS NOT NULL THEN
        RAISE EXCEPTION 'relation % already exists', filter_table USING ERRCODE = 'duplicate_table';
    END IF;
    t.impressions := impressions;
    t.filter_table := seen_bloom._create_filter_table(impressions, filter_table, user_type);
    t.user_column := user_column;
    t.item_column := item_column;
    t.time_column := time_column;
    t.user_type := user_type;
    t.item_type := item_type;
    t."where" := "where";
    t.tracked_at := now();
    -- Layout 3 writes layer rows in place, which logical decoding does not see, and Citus
    -- moves shards by logical replication: distributed tables keep layout 2.
    IF distributed THEN
        t.layout := 2;
    END IF;
    PERFORM seen_bloom._write_tracked('insert', t);

    IF distributed THEN
        -- The filter table distributed with the impressions while both are empty.
        PERFORM seen_bloom._citus_distribute(t);
    END IF;
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    PERFORM seen_bloom._make_tracking(t);
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
    IF time_column IS NOT NULL AND EXISTS (
        SELECT 1 FROM pg_attribute a WHERE a.attrelid = impressions AND a.attname = time_column
           AND NOT a.attnotnull AND NOT a.atthasdef) THEN
        RAISE NOTICE 'seen_bloom.track: an insert into % whose % is NULL will fail with 23502', impressions, time_column
            USING HINT = format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT now()', impressions, time_column);
    END IF;

    -- Backfill: the impressions already in the window, in 64 slices of users (a distributed
    -- table is empty, see _citus_check_trackable).
    IF distributed THEN
        RETURN filter_table::regclass;
    END IF;
    PERFORM seen_bloom._as_owner(impressions, format('SELECT pg_catalog.count(*) FROM (%s) f',
        seen_bloom._fold_query(t, impressions::text, 'true', 'seen_bloom.item_hash(u) OPERATOR(pg_catalog.&) 63')));
    RETURN filter_table::regclass;
END $track$;
COMMENT ON FUNCTION seen_bloom.track(regclass, name, name, name, interval, bigint, float8, text, int) IS
    'Tracks an impressions table: creates <impressions>_seen, the triggers that fold each inserted batch into it in the same transaction, and backfills the window cut in `generations` time buckets; returns the filter table';

CREATE OR REPLACE FUNCTION seen_bloom._forget_config(impressions regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__forget_config' LANGUAGE C STRICT;
-- Each call makes every backend drop its caches at commit: not for everyone to flood.
REVOKE ALL ON FUNCTION seen_bloom._forget_config(regclass) FROM PUBLIC;
COMMENT ON FUNCTION seen_bloom._forget_config(regclass) IS 'Internal: makes every backend read the table''s tracking configuration again once the transaction commits';

-- A table's layout changed: the generated trigger functions (which pass the layout to
-- seen_bloom._fold) are remade and every backend reads the configuration again at commit.
-- A trigger does it, enabled ALWAYS, so that it also runs where logical replication applies
-- the change: a subscriber of a FOR ALL TABLES publication receives seen_bloom.tracked, and
-- one left with the publisher's former layout would read moved rows as the old layout's and,
-- after a move to layout 3, not make the in-place writes that logical decoding does not
-- carry (its items would read unseen). The change then takes effect there at the same point
-- of the stream as on the publisher.
CREATE OR REPLACE FUNCTION seen_bloom._layout_changed() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM seen_bloom.repair_triggers(NEW.impressions);
    PERFORM seen_bloom._forget_config(r) FROM seen_bloom._tracked_relations(NEW.impressions) r;
    -- The folds that know only the filter table (seen_bloom._fold) keep its cap by it.
    PERFORM seen_bloom._forget_config(NEW.filter_table);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION seen_bloom._layout_changed() IS
    'Internal: remakes a tracked table''s generated trigger functions and makes every backend read its configuration again at commit, when its layout or per-user cap changes (also where logical replication applies the change)';

-- The settings every backend and the filter rows' layout depend on change only by retrack: an
-- edit of the row (a superuser's UPDATE) would leave backends that read the configuration
-- before it on the old window, and rows sized for the old error rate read with the new one.
CREATE OR REPLACE FUNCTION seen_bloom._settings_frozen() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'the tracking settings of % cannot be edited in seen_bloom.tracked', OLD.impressions
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'Its window, generations, capacity, error rate, filter table and user type are read by every backend and size its filter rows; an edit would leave it half-configured.',
              HINT = format('Call seen_bloom.retrack(%L, ...) with the new settings.', OLD.impressions::text);
END $$;
COMMENT ON FUNCTION seen_bloom._settings_frozen() IS
    'Internal: refuses an UPDATE of seen_bloom.tracked that changes a table''s window, generations, capacity, error rate, filter table or user type (seen_bloom.retrack changes them)';

-- Sets a table's layout (relayout); the trigger above does the rest.
CREATE OR REPLACE FUNCTION seen_bloom._set_layout(impressions regclass, layout int) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    SELECT * INTO t FROM seen_bloom.tracked x WHERE x.impressions = _set_layout.impressions;
    t.layout := _set_layout.layout;
    PERFORM seen_bloom._write_tracked('update', t);
END $$;
COMMENT ON FUNCTION seen_bloom._set_layout(regclass, int) IS
    'Internal: sets a tracked table''s layout; trigger seen_bloom_layout remakes its generated trigger functions and makes every backend read its configuration again at commit (relayout)';

-- The per-user cap (README, "Capping a user's impressions"): changes no filter row, only
-- what the folds take in from the commit on; the trigger above makes every backend read it.
CREATE OR REPLACE FUNCTION seen_bloom.set_user_cap(impressions regclass, user_cap bigint) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    IF impressions IS NOT NULL THEN
        PERFORM seen_bloom._check_owner(impressions);
    END IF;
    t := seen_bloom._tracked(impressions);
    IF user_cap < 1 OR user_cap > 1000000000 THEN
        RAISE EXCEPTION 'user_cap must be between 1 and 1000000000 (NULL: no cap), got %', user_cap
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NOT NULL THEN
        RAISE EXCEPTION 'seen_bloom.set_user_cap: % is distributed by Citus, whose workers keep no cap', impressions
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF EXISTS (SELECT 1 FROM seen_bloom.retracking r WHERE r.impressions = t.impressions) THEN
        RAISE EXCEPTION 'seen_bloom.set_user_cap: a retrack of % is not finished', impressions
            USING ERRCODE = 'object_in_use',
                  HINT = format('Finish it first: CALL seen_bloom.retrack(%L);', impressions::text);
    END IF;
    t.user_cap := user_cap;
    PERFORM seen_bloom._write_tracked('update', t);
END $$;
COMMENT ON FUNCTION seen_bloom.set_user_cap(regclass, bigint) IS
    'Caps what one user''s filter takes in per generation at user_cap items (NULL: no cap), from this transaction''s commit on: impressions past it stay in the table but are not folded (seen_bloom.activity counts them, seen_bloom.health names the users at the cap); no filter row changes';

-- Moving a table to layout 3 (docs/DESIGN.md, "Layout 3: layer rows written in place at
-- commit", from "seen_bloom.relayout" on).
-- Layout 2 sizes its rows as layout 3 does: the move changes how the folds write, not what
-- the rows hold: the row of seen_bloom.tracked, the generated trigger functions, and every
-- backend's cached configuration (at commit). Folds that started before keep writing new row
-- versions under the same user locks, which layout 3 reads.
-- Layout 1 sizes its rows otherwise: the table goes to layout 13, where a user's rows are
-- layout 3's once it has a marker row (src/relayout.rs), and its users are rebuilt in
-- batches, each getting its marker; then layout 3, and the markers go. Between these steps
-- the procedure waits for the transactions that may still read the layout before.
CREATE OR REPLACE PROCEDURE seen_bloom.relayout(impressions regclass)
LANGUAGE plpgsql AS $$
DECLARE
    t seen_bloom.tracked;
    users_sql pg_catalog.text;
    total pg_catalog.int8;
BEGIN
    -- Pinned per transaction, as in rebuild (a procedure that commits has no SET clause).
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM seen_bloom._check_owner(impressions);
    IF pg_catalog.current_setting('transaction_read_only')::pg_catalog.bool THEN
        RAISE EXCEPTION 'seen_bloom.relayout cannot run in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    -- (No FOR UPDATE: it would ask for UPDATE on seen_bloom.tracked; two moves at once
    -- meet in _set_layout's write, and each step below is idempotent.)
    SELECT * INTO t FROM seen_bloom.tracked x WHERE x.impressions OPERATOR(pg_catalog.=) relayout.impressions;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not tracked by seen_bloom', impressions USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF t.layout OPERATOR(pg_catalog.=) 3 OR t.layout OPERATOR(pg_catalog.>=) 1000 THEN
        RAISE NOTICE 'seen_bloom.relayout: % is already written in place (layout %)', impressions, t.layout;
        RETURN;
    END IF;
    IF (seen_bloom._citus_table_of(impressions)).distributed IS NOT NULL THEN
        RAISE EXCEPTION 'seen_bloom.relayout: % is distributed by Citus, whose shard moves do not carry layout 3''s in-place writes', impressions
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF t.layout OPERATOR(pg_catalog.<>) ALL (ARRAY[1, 2, 13]) THEN
        RAISE EXCEPTION 'seen_bloom.relayout: % is in layout %, which this build does not know', impressions, t.layout
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF t.layout OPERATOR(pg_catalog.=) 2 THEN
        -- Folds that took layout 2 write layer rows as row versions, copying the bits they
        -- read: layout 3's folds at commit, which take no user lock, wait until those ended.
        PERFORM seen_bloom._exclude_commit_folds(t.filter_table, true);
        PERFORM seen_bloom._set_layout(impressions, 3);
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        PERFORM seen_bloom._wait_for_snapshots();
        PERFORM seen_bloom._exclude_commit_folds(t.filter_table, false);
        RAISE NOTICE 'seen_bloom.relayout(%): in layout 3', impressions;
        RETURN;
    END IF;
    IF t.layout OPERATOR(pg_catalog.=) 1 THEN
        t.layout := 13;
        PERFORM seen_bloom._set_layout(impressions, t.layout);
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    END IF;
    -- Reads and folds that took layout 1 end before a user moves: they do not look for markers.
    PERFORM seen_bloom._wait_for_snapshots();
    -- Users with rows and no marker, until none is left (a batch's users are moved in one
    -- transaction under their locks; a user with no row gets its marker from its next fold).
    users_sql := pg_catalog.format(
        'SELECT DISTINCT f.user_key AS u FROM %s f
         WHERE NOT EXISTS (SELECT 1 FROM %s m WHERE m.user_key OPERATOR(pg_catalog.=) f.user_key
                           AND m.generation OPERATOR(pg_catalog.=) 2147483647 AND m.layer OPERATOR(pg_catalog.=) -3)',
        t.filter_table, t.filter_table);
    LOOP
        -- A move of the same table run at the same time may have finished it (and deleted
        -- the markers, which would make every user look unmoved here).
        EXIT WHEN (SELECT x.layout FROM seen_bloom.tracked x WHERE x.impressions OPERATOR(pg_catalog.=) relayout.impressions)
                  IS DISTINCT FROM 13;
        CALL seen_bloom._each_user_batch(t, users_sql, '_rebuild_users', 1000, pg_catalog.format('seen_bloom.relayout(%s)', impressions), total);
        EXIT WHEN total OPERATOR(pg_catalog.=) 0;
    END LOOP;
    -- Snapshots taken before the last user moved would read unmarked rows as layout 3's.
    PERFORM seen_bloom._wait_for_snapshots();
    PERFORM seen_bloom._set_layout(impressions, 3);
    COMMIT;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    -- Folds that took layout 13 look for markers: they end before the markers go.
    PERFORM seen_bloom._wait_for_snapshots();
    PERFORM seen_bloom._as_owner(impressions, pg_catalog.format(
        'DELETE FROM %s WHERE generation OPERATOR(pg_catalog.=) 2147483647 AND layer OPERATOR(pg_catalog.=) -3', t.filter_table));
    RAISE NOTICE 'seen_bloom.relayout(%): in layout 3', impressions;
END $$;
COMMENT ON PROCEDURE seen_bloom.relayout(regclass) IS
    'Moves a tracked table to layout 3 (layer rows written in place at commit: about 90 B of WAL per impression at wal_level logical), online: from layout 2 at once, from layout 1 by rebuilding its users in batches of 1,000, committing each (CALL it outside a transaction block; CALL it again to finish a move that stopped)';

CREATE OR REPLACE FUNCTION seen_bloom.untrack(impressions regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._check_owner(impressions);
    PERFORM seen_bloom._drop_retrack(impressions);
    -- The row first: the DDL event trigger refuses to drop the filter table of a tracked table.
    PERFORM seen_bloom._write_tracked('delete', t);
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    PERFORM seen_bloom._drop_tracking(t);
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
END $$;
CREATE OR REPLACE FUNCTION seen_bloom._drop_tracking(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r regclass;
BEGIN
    -- The triggers, on the table and its partitions (none left when it was dropped), each
    -- dropped as its table's owner.
    FOR r IN SELECT x FROM seen_bloom._tracked_relations(t.impressions) x LOOP
        PERFORM seen_bloom._as_owner(r, 'SELECT seen_bloom._drop_triggers($1)', r);
    END LOOP;
    IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NOT NULL THEN
        PERFORM seen_bloom._citus_drop_read_functions(t);
    END IF;
    -- The generated functions and the filter table, as the filter table's owner (gone already
    -- when a DROP SCHEMA took both).
    -- A filter table of another owner than a table that still exists is not this table's
    -- (a row written by hand): left alone.
    IF EXISTS (SELECT 1 FROM pg_class f JOIN pg_class c ON c.oid = t.impressions
               WHERE f.oid = t.filter_table AND f.relowner <> c.relowner) THEN
        RAISE WARNING 'seen_bloom: % is left in place: it does not belong to the owner of %', t.filter_table, t.impressions;
    ELSIF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.filter_table) THEN
        PERFORM seen_bloom._as_owner(t.filter_table, 'SELECT seen_bloom._drop_filter_table($1)', t);
    END IF;
END $$;
-- Run as the filter table's owner (seen_bloom._as_owner): drops only the generated functions
-- that owner owns, then the table.
CREATE OR REPLACE FUNCTION seen_bloom._drop_filter_table(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    filter_namespace oid;
    filter_owner oid;
    base text;
    f regprocedure;
BEGIN
    SELECT c.relnamespace, c.relowner, seen_bloom._function_base(c.relname) INTO filter_namespace, filter_owner, base
    FROM pg_class c WHERE c.oid = t.filter_table;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The generated functions are linked to the filter table (pg_depend) and go with it;
    -- those of a table tracked before the links (and on Citus) are found by name, the
    -- owner's own only. CASCADE: on Citus, a shard's old placement keeps its copies of the
    -- triggers until the deferred cleanup drops it.
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = filter_namespace AND p.pronargs = 0 AND p.proowner = filter_owner
               AND p.prorettype = 'trigger'::regtype
               AND p.proname IN (base || '_fold', base || '_fold_row', base || '_truncate')
               AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                  AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.filter_table AND d.deptype = 'a')
    LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %s CASCADE', f);
    END LOOP;
    EXECUTE format('DROP TABLE IF EXISTS %s', t.filter_table);
END $$;
COMMENT ON FUNCTION seen_bloom._drop_filter_table(seen_bloom.tracked) IS 'Internal: drops a tracking''s generated functions and filter table, as the filter table''s owner';
COMMENT ON FUNCTION seen_bloom._drop_tracking(seen_bloom.tracked) IS 'Internal: drops the triggers, generated functions and filter table of a tracking configuration';
COMMENT ON FUNCTION seen_bloom.untrack(regclass) IS 'Stops tracking: drops the triggers, the filter table and the configuration row';

-- New settings for a tracked table, online (docs/OPERATIONS.md, "Changing the settings"):
-- 1. the settings are checked and recorded in seen_bloom.retracking with a filter table of
--    their own, <filter>_next, and triggers seen_bloom_next_* fold every insert into it too;
-- 2. its users are rebuilt into it from the impressions in the new window, in batches of
--    1,000, each committed (the folds of step 1 and these rebuilds meet under the user locks,
--    as rebuild's do with the table's own folds);
-- 3. one short transaction swaps the tables: the old one and its triggers go, the new one
--    takes its name and triggers, and every backend reads the new settings at commit.
-- Reads use the old filter rows until 3 commits. A move that stopped (a cancel, a crash)
-- keeps folding into <filter>_next until the next retrack starts it again or untrack ends it.

-- The filter table a retrack of t fills: <filter>_next beside it, named by bytes as track
-- names filter tables.
CREATE OR REPLACE FUNCTION seen_bloom._next_filter_name(t seen_bloom.tracked) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel record;
BEGIN
    SELECT c.relname, n.nspname INTO rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = t.filter_table;
    RETURN format('%I.%I', rel.nspname, seen_bloom._cut_to_bytes(rel.relname, 58) || '_next');
END $$;
COMMENT ON FUNCTION seen_bloom._next_filter_name(seen_bloom.tracked) IS 'Internal: the qualified name of the filter table a retrack of the table fills';

-- The fold function of a retrack's filter table: <base>_fold beside it, as track names its own.
CREATE OR REPLACE FUNCTION seen_bloom._next_fold_function(next_filter regclass) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT format('%I.%I', n.nspname, seen_bloom._function_base(c.relname) || '_fold')
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = next_filter
$$;
COMMENT ON FUNCTION seen_bloom._next_fold_function(regclass) IS 'Internal: the qualified name of the fold function of a retrack''s filter table';

-- Ends a move that did not finish (retrack starts again; untrack): its triggers, and its
-- filter table with the fold function linked to it, each as its owner.
CREATE OR REPLACE FUNCTION seen_bloom._drop_retrack(impressions regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    nxt seen_bloom.tracked;
    r regclass;
BEGIN
    SELECT * INTO nxt FROM seen_bloom.retracking x WHERE x.impressions = _drop_retrack.impressions;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    FOR r IN SELECT x FROM seen_bloom._tracked_relations(impressions) x LOOP
        PERFORM seen_bloom._as_owner(r, 'SELECT seen_bloom._drop_next_triggers($1)', r);
    END LOOP;
    PERFORM seen_bloom._write_tracked('delete next', nxt);
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = nxt.filter_table) THEN
        PERFORM seen_bloom._as_owner(nxt.filter_table, format('DROP TABLE %s CASCADE', nxt.filter_table));
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._drop_retrack(regclass) IS 'Internal: ends a retrack of the table that did not finish: its triggers, filter table, fold function and row';

-- Step 1 of retrack, as a caller holding the owner's privileges: returns the configuration
-- the table moves to (its filter table the new one).
CREATE OR REPLACE FUNCTION seen_bloom._retrack_start(t seen_bloom.tracked, "window" interval, capacity bigint,
                                          error_rate float8, generations int) RETURNS seen_bloom.tracked
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    nxt seen_bloom.tracked;
    next_name text;
    fold_function text;
    r regclass;
BEGIN
    PERFORM seen_bloom._check_owner(t.impressions);
    -- A capacity is kept, and so is its absence (layout 3).
    nxt := seen_bloom._with_settings(t, coalesce("window", t."window"),
                                     coalesce(capacity, CASE WHEN t.layout >= 1000 THEN t.capacity END),
                                     coalesce(error_rate, t.error_rate), coalesce(generations, t.generations));
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    PERFORM seen_bloom._drop_retrack(t.impressions);
    next_name := seen_bloom._next_filter_name(t);
    IF to_regclass(next_name) IS NOT NULL THEN
        RAISE EXCEPTION 'relation % already exists', next_name USING ERRCODE = 'duplicate_table',
            HINT = 'seen_bloom.retrack builds the new filter rows under that name: rename or drop it.';
    END IF;
    nxt.filter_table := seen_bloom._create_filter_table(t.impressions, next_name, t.user_type);
    nxt.tracked_at := now();
    PERFORM seen_bloom._write_tracked('insert next', nxt);
    -- One function for the statement folds and TRUNCATE, given to the owner as track's are.
    fold_function := seen_bloom._next_fold_function(nxt.filter_table);
    EXECUTE format('CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS %L', fold_function, format('BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) ''TRUNCATE'' THEN
        TRUNCATE %s;
    ELSE
        PERFORM * FROM (%s) f;
    END IF;
    RETURN NULL;
END', nxt.filter_table, seen_bloom._fold_query(nxt, 'new_rows')));
    EXECUTE format('ALTER FUNCTION %s() OWNER TO %I', fold_function, pg_get_userbyid((SELECT c.relowner FROM pg_class c WHERE c.oid = t.impressions)));
    EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', fold_function);
    PERFORM seen_bloom._link('pg_proc', format('%s()', fold_function)::regprocedure, nxt.filter_table);
    EXECUTE format('COMMENT ON FUNCTION %s() IS %L', fold_function,
                   format('seen_bloom: folds new impressions of %s into %s while seen_bloom.retrack moves it', t.impressions, nxt.filter_table));
    -- On the table and each partition, as track's (a statement trigger of a partitioned table
    -- does not fire for rows inserted into a partition directly).
    FOR r IN SELECT x FROM seen_bloom._tracked_relations(t.impressions) x LOOP
        EXECUTE format('CREATE TRIGGER seen_bloom_next_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows
                        FOR EACH STATEMENT EXECUTE FUNCTION %s()', r, fold_function);
        EXECUTE format('CREATE TRIGGER seen_bloom_next_update AFTER UPDATE ON %s REFERENCING NEW TABLE AS new_rows
                        FOR EACH STATEMENT EXECUTE FUNCTION %s()', r, fold_function);
    END LOOP;
    EXECUTE format('CREATE TRIGGER seen_bloom_next_truncate AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s()',
                   t.impressions, fold_function);
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
    RETURN nxt;
END $$;
COMMENT ON FUNCTION seen_bloom._retrack_start(seen_bloom.tracked, interval, bigint, float8, int) IS
    'Internal: starts a retrack: the new settings (NULL: kept), recorded with a new filter table that triggers fold every insert into';

-- Step 3 of retrack: under a lock that holds inserts off for its length, the table is tracked
-- with the new settings in the new filter table, which takes the old one's name.
CREATE OR REPLACE FUNCTION seen_bloom._retrack_finish(impressions regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    nxt seen_bloom.tracked;
    old_name name;
    old_index name;
    r regclass;
    acl record;
BEGIN
    PERFORM seen_bloom._check_owner(impressions);
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', impressions);
    t := seen_bloom._tracked(impressions);
    SELECT * INTO nxt FROM seen_bloom.retracking x WHERE x.impressions = _retrack_finish.impressions;
    -- A retrack started meanwhile (which wins), or a change of the columns the folds name.
    IF NOT FOUND OR (nxt.user_column, nxt.item_column, nxt.time_column, nxt."where")
                    IS DISTINCT FROM (t.user_column, t.item_column, t.time_column, t."where") THEN
        RAISE EXCEPTION 'seen_bloom.retrack(%): the table or its retrack changed while it ran', impressions
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Call seen_bloom.retrack again.';
    END IF;
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    -- A partition made meanwhile has no seen_bloom_next_insert: its rows are folded now.
    FOR r IN SELECT x FROM seen_bloom._tracked_relations(impressions) x
             WHERE NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = x AND g.tgname = 'seen_bloom_next_insert') LOOP
        PERFORM seen_bloom._as_owner(impressions, format('SELECT pg_catalog.count(*) FROM (%s) f', seen_bloom._fold_query(nxt, r::text)));
    END LOOP;
    SELECT c.relname INTO old_name FROM pg_class c WHERE c.oid = t.filter_table;
    SELECT i.relname INTO old_index FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
    WHERE x.indrelid = t.filter_table AND x.indisprimary;
    -- The grants on the old filter table (a reader's SELECT) carry over.
    FOR acl IN SELECT a.grantee, a.privilege_type, a.is_grantable FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = t.filter_table AND a.grantee <> c.relowner LOOP
        PERFORM seen_bloom._as_owner(nxt.filter_table, format('GRANT %s ON %s TO %s%s', acl.privilege_type, nxt.filter_table,
            CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END,
            CASE WHEN acl.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END));
    END LOOP;
    FOR r IN SELECT x FROM seen_bloom._tracked_relations(impressions) x LOOP
        PERFORM seen_bloom._as_owner(r, 'SELECT seen_bloom._drop_next_triggers($1)', r);
    END LOOP;
    PERFORM seen_bloom._write_tracked('delete', t);
    PERFORM seen_bloom._drop_tracking(t);
    PERFORM seen_bloom._write_tracked('delete next', nxt);
    -- The move's fold function goes; the table takes the old names.
    PERFORM seen_bloom._as_owner(nxt.filter_table, format('DROP FUNCTION %s()', seen_bloom._next_fold_function(nxt.filter_table)));
    PERFORM seen_bloom._as_owner(nxt.filter_table, format('ALTER TABLE %s RENAME TO %I', nxt.filter_table, old_name));
    IF old_index IS NOT NULL THEN
        PERFORM seen_bloom._as_owner(nxt.filter_table, format('ALTER INDEX %I.%I RENAME TO %I',
            (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = nxt.filter_table),
            (SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = nxt.filter_table AND x.indisprimary),
            old_index));
    END IF;
    PERFORM seen_bloom._write_tracked('insert', nxt);
    -- (Dropping the triggers above made every backend read the configuration again.)
    PERFORM seen_bloom._make_tracking(nxt);
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
END $$;
COMMENT ON FUNCTION seen_bloom._retrack_finish(regclass) IS
    'Internal: ends a retrack: the table tracked with the new settings in the filter table it filled, under the old name';

CREATE OR REPLACE PROCEDURE seen_bloom.retrack(impressions regclass, "window" interval DEFAULT NULL,
                                    capacity bigint DEFAULT NULL, error_rate float8 DEFAULT NULL,
                                    generations int DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    t seen_bloom.tracked;
    nxt seen_bloom.tracked;
    caller pg_catalog.text;
    users_sql pg_catalog.text;
    total pg_catalog.int8;
    attempts pg_catalog.int4 := 0;
BEGIN
    -- Pinned per transaction, as in rebuild (a procedure that commits has no SET clause).
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._check_owner(impressions);
    caller := pg_catalog.format('seen_bloom.retrack(%s)', impressions);
    PERFORM seen_bloom._require_own_transaction(caller);
    IF (seen_bloom._citus_table_of(impressions)).distributed IS NOT NULL THEN
        RAISE EXCEPTION 'seen_bloom.retrack: % is distributed by Citus', impressions
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Track it again: seen_bloom.untrack, then seen_bloom.track with the new settings, while it is empty.';
    END IF;
    -- A subscriber's rows come through seen_bloom_replica, which the move does not follow.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_subscription_rel s
               WHERE s.srrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x::pg_catalog.oid FROM seen_bloom._tracked_relations(impressions) x))) THEN
        RAISE EXCEPTION 'seen_bloom.retrack: % is written by a logical replication subscription', impressions
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Retrack it on the publisher, or untrack and track it again here.';
    END IF;
    nxt := seen_bloom._retrack_start(t, "window", capacity, error_rate, generations);
    COMMIT;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    -- Every user with impressions: _rebuild_users keeps those in the new window.
    users_sql := pg_catalog.format('SELECT DISTINCT %I AS u FROM %s WHERE %I IS NOT NULL', t.user_column, impressions, t.user_column);
    CALL seen_bloom._each_user_batch(nxt, users_sql, '_rebuild_users', 1000, caller, total);
    -- The swap holds inserts off while it waits for its locks (the old filter table's readers):
    -- a second at a time, then it lets them through and tries again (at most 60 times).
    LOOP
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '1s', true);
            PERFORM seen_bloom._retrack_finish(impressions);
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            attempts := attempts OPERATOR(pg_catalog.+) 1;
            IF attempts OPERATOR(pg_catalog.>=) 60 THEN
                RAISE;
            END IF;
            RAISE NOTICE '%: the swap waited 1 s for a lock (attempt %), trying again', caller, attempts;
            PERFORM pg_catalog.pg_sleep(0.5);
        END;
    END LOOP;
    COMMIT;
    RAISE NOTICE '%: window %, % generations, error rate %, capacity %', caller, nxt."window", nxt.generations, nxt.error_rate,
        CASE WHEN nxt.layout OPERATOR(pg_catalog.>=) 1000 THEN nxt.capacity::pg_catalog.text ELSE 'none' END;
END $$;
COMMENT ON PROCEDURE seen_bloom.retrack(regclass, interval, bigint, float8, int) IS
    'Changes a tracked table''s window, capacity, error rate or generations (NULL: unchanged), online: builds a new filter table from its impressions in batches of 1,000 users, committing each, while reads use the old one, then swaps them in one short transaction; CALL it outside a transaction block (again to start a move that stopped)';

CREATE OR REPLACE FUNCTION seen_bloom.filter(impressions regclass, "user" anyelement) RETURNS bloom
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    result @extschema@.bloom;
BEGIN
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._require_user_type(t, pg_typeof("user")::regtype, 'seen_bloom.filter');
    -- As the table's owner (its `where` predicate is the owner's code). Every argument has the
    -- exact type of an extension function (integer items as bigint), so an overload someone
    -- adds in the extension's schema is never a better match.
    result := seen_bloom._as_owner(impressions, format(
                   'SELECT @extschema@.bloom_agg(n.%I::%s, %s::pg_catalog.int8, %s::pg_catalog.float8)::pg_catalog.text FROM %s n
                    WHERE n.%I OPERATOR(pg_catalog.=) $1 AND n.%I IS NOT NULL AND (%s) AND (%s)',
                   t.item_column,
                   CASE t.item_type WHEN 'integer'::regtype THEN 'pg_catalog.int8' WHEN 'bigint'::regtype THEN 'pg_catalog.int8'
                                    WHEN 'text'::regtype THEN 'pg_catalog.text' WHEN 'character varying'::regtype THEN 'pg_catalog.text'
                                    ELSE 'pg_catalog.uuid' END,
                   t.capacity, t.error_rate, impressions, t.user_column, t.item_column,
                   CASE WHEN t.time_column IS NULL THEN 'true'
                        ELSE format('seen_bloom._utc(n.%I) OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %L::pg_catalog.interval)',
                                    t.time_column, t."window") END,
                   coalesce(t."where", 'true')), "user")::@extschema@.bloom;
    RETURN coalesce(result, @extschema@.bloom_empty(t.capacity, t.error_rate, true));
END $$;
COMMENT ON FUNCTION seen_bloom.filter(regclass, anyelement) IS
    'The user''s live window as one bloom value, built from the impressions themselves (the durable truth) with the tracked capacity and error rate';

CREATE OR REPLACE FUNCTION seen_bloom.expire(impressions regclass DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    deleted bigint;
    total bigint := 0;
BEGIN
    IF impressions IS NOT NULL THEN
        PERFORM seen_bloom._tracked(impressions);
        PERFORM seen_bloom._check_owner(impressions);
    END IF;
    -- Each table as its owner; without a table, the tables whose owner's privileges the
    -- caller holds (all of them for a superuser), as VACUUM without a table does.
    FOR t IN SELECT x.* FROM seen_bloom.tracked x JOIN pg_class c ON c.oid = x.impressions
             WHERE (expire.impressions IS NULL AND pg_has_role(c.relowner, 'USAGE')) OR x.impressions = expire.impressions LOOP
        -- The oldest live generation as a constant: Citus runs a DELETE on every shard only
        -- with immutable expressions.
        -- (the background worker's maintenance of the table, or another expire, first)
        PERFORM seen_bloom._maintenance_lock(t.impressions, true);
        deleted := seen_bloom._as_owner(t.impressions, format('DELETE FROM %s WHERE generation OPERATOR(pg_catalog.<) %s',
                       t.filter_table, seen_bloom._oldest_live_generation(now(), t."window", t.generation_seconds)))::bigint;
        PERFORM seen_bloom._maintenance_unlock(t.impressions);
        total := total + deleted;
    END LOOP;
    RETURN total;
END $$;
COMMENT ON FUNCTION seen_bloom.expire(regclass) IS
    'Deletes filter rows of generations that left the window (all tracked tables when NULL) and returns how many; reads ignore them already';

-- The users of a query (column u) in batches of `batch_users`, in user order
-- (_each_user_batch commits after each, its step taking the batch's locks in that order).
CREATE OR REPLACE FUNCTION seen_bloom._user_batches_query(users_sql text, batch_users int) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT format(
        'SELECT pg_catalog.array_agg(u ORDER BY u) AS users
         FROM (SELECT u, (pg_catalog.row_number() OVER (ORDER BY u) OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog./) %s::pg_catalog.int8 AS b
               FROM (%s) s) s
         GROUP BY b ORDER BY b', batch_users, users_sql)
$$;
COMMENT ON FUNCTION seen_bloom._user_batches_query(text, int) IS 'Internal: the query of a user query''s users in ordered batches (_each_user_batch)';

-- Rebuilds users from their impressions in the window, under their locks: their rows go,
-- and their impressions are folded anew (in a table being moved from layout 1, into layout
-- 3's rows with a marker: they have no row left when the fold starts).
CREATE OR REPLACE FUNCTION seen_bloom._rebuild_users(t seen_bloom.tracked, users anyarray) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM seen_bloom._lock_users(t.filter_table, users);
    EXECUTE format('DELETE FROM %s WHERE user_key OPERATOR(pg_catalog.=) ANY ($1)', t.filter_table) USING users;
    EXECUTE format('SELECT pg_catalog.count(*) FROM (%s) f',
                   seen_bloom._fold_query(t, t.impressions::text,
                                          format('n.%I OPERATOR(pg_catalog.=) ANY (%L)', t.user_column, users)));
END $$;
COMMENT ON FUNCTION seen_bloom._rebuild_users(seen_bloom.tracked, anyarray) IS
    'Internal: rebuilds these users'' filter rows from their impressions in the window, under their locks (rebuild, relayout)';

CREATE OR REPLACE PROCEDURE seen_bloom.rebuild(impressions regclass, "user" anyelement)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._require_user_type(t, pg_catalog.pg_typeof("user")::pg_catalog.regtype, 'seen_bloom.rebuild');
    PERFORM seen_bloom._check_owner(impressions);
    IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NOT NULL THEN
        -- On the worker that holds the user (the other shards have nothing to do).
        PERFORM seen_bloom._citus_on_placements(t, pg_catalog.format(
            'SELECT seen_bloom._citus_rebuild_shard(%s, %s, %s)', '''%1$s''', '''%2$s''',
            pg_catalog.replace(pg_catalog.quote_literal("user"::pg_catalog.text), '%', '%%')));
        RETURN;
    END IF;
    PERFORM seen_bloom._as_owner(impressions, format('SELECT seen_bloom._rebuild_users(%L::seen_bloom.tracked, $1)', t), ARRAY["user"]);
END $$;
COMMENT ON PROCEDURE seen_bloom.rebuild(regclass, anyelement) IS
    'Repairs one user''s filter from the impression rows in the window (after DELETEs of impressions, or any doubt)';

-- The users of a query (column u) in batches of `batch_users`, each passed to
-- seen_bloom.<step>(t, users) and committed, with a NOTICE of the count and of progress named
-- by `caller` (rebuild and relayout: _rebuild_users; compact: _compact_users); `total`
-- returns the users found.
CREATE OR REPLACE PROCEDURE seen_bloom._each_user_batch(t seen_bloom.tracked, users_sql text, step text, batch_users int,
                                             caller text, INOUT total bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    done pg_catalog.int8 := 0;
    batch pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM seen_bloom._require_own_transaction(caller);
    -- The queries and the steps read and write the table's rows: as its owner.
    total := seen_bloom._as_owner(t.impressions, pg_catalog.format('SELECT pg_catalog.count(*) FROM (%s) s', users_sql))::pg_catalog.int8;
    RAISE NOTICE '%: % users', caller, total;
    -- The batches' users as text, each batch cast back to an array of the user type.
    FOR batch IN SELECT b.value FROM pg_catalog.json_array_elements_text(coalesce(seen_bloom._as_owner(t.impressions,
                     pg_catalog.format('SELECT pg_catalog.json_agg(b.users) FROM (%s) b',
                                       seen_bloom._user_batches_query(users_sql, batch_users))), '[]')::pg_catalog.json) b
    LOOP
        PERFORM seen_bloom._as_owner(t.impressions,
            pg_catalog.format('SELECT seen_bloom.%I(%L::seen_bloom.tracked, ARRAY(SELECT pg_catalog.json_array_elements_text($1::pg_catalog.json))::%s[])',
                              step, t, t.user_type),
            batch);
        done := done OPERATOR(pg_catalog.+) pg_catalog.json_array_length(batch::pg_catalog.json)::pg_catalog.int8;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        RAISE NOTICE '%: % / % users', caller, done, total;
    END LOOP;
END $$;
COMMENT ON PROCEDURE seen_bloom._each_user_batch(seen_bloom.tracked, text, text, int, text, bigint) IS
    'Internal: passes the users of a query to a step function in batches, committing each, with NOTICEs of progress (rebuild, relayout, compact)';

CREATE OR REPLACE PROCEDURE seen_bloom.rebuild(impressions regclass)
LANGUAGE plpgsql AS $$
DECLARE
    t seen_bloom.tracked;
    total pg_catalog.int8;
    users_sql pg_catalog.text;
BEGIN
    -- A procedure that commits cannot have a SET clause: the search_path is pinned for each
    -- transaction instead (SET LOCAL ends with it), and every name is qualified as well (the
    -- variables' types too: they are resolved before the first statement).
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._check_owner(impressions);
    IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NOT NULL THEN
        -- Shard by shard, each in a transaction of its own on its worker.
        RAISE NOTICE 'seen_bloom.rebuild(%): % users', impressions, seen_bloom._citus_on_placements(t,
            'SELECT seen_bloom._citus_rebuild_shard(''%1$s'', ''%2$s'', NULL)');
        RETURN;
    END IF;
    -- Users with impressions and users with filter rows: both are rebuilt (the latter to nothing).
    users_sql := pg_catalog.format('SELECT %I AS u FROM %s WHERE %I IS NOT NULL UNION SELECT user_key FROM %s',
                                   t.user_column, impressions, t.user_column, t.filter_table);
    CALL seen_bloom._each_user_batch(t, users_sql, '_rebuild_users', 1000, pg_catalog.format('seen_bloom.rebuild(%s)', impressions), total);
END $$;
COMMENT ON PROCEDURE seen_bloom.rebuild(regclass) IS
    'Repairs every user''s filter from the impression rows in the window, committing every 1,000 users with a NOTICE of progress (users done / total); CALL it outside a transaction block';

-- seen_bloom.compact: a user's rows replaced by one compacted filter (rows of one part each)
-- built from the impressions of live generations, sized for exactly their items at half the table's
-- error rate (the other half is left to the layers that later impressions fill until the
-- next compaction). Keyed by the newest generation its items came from, so reads use it
-- while any of them can be in the window; layer -2 sorts below every layered row. Under a
-- per-user cap, a generation gives its first user_cap distinct items by time, as its layers
-- took them in (within the few items each segment's own fill makes the layers' cap differ).
CREATE OR REPLACE FUNCTION seen_bloom._compact_users(t seen_bloom.tracked, users anyarray) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    written bigint;
    items text := seen_bloom._window_items_query_of(t, t.impressions::text,
                                                    format('n.%I OPERATOR(pg_catalog.=) ANY ($1)', t.user_column), true);
BEGIN
    IF t.user_cap IS NOT NULL THEN
        items := format(
            'SELECT d.u, d.gen, d.h FROM (
                 SELECT e.u, e.gen, e.h,
                        pg_catalog.row_number() OVER (PARTITION BY e.u, e.gen ORDER BY e.first_at, e.h) AS k
                 FROM (SELECT i.u, i.gen, i.h, pg_catalog.min(i.at) AS first_at FROM (%s) i
                       WHERE i.gen IS NOT NULL GROUP BY i.u, i.gen, i.h) e) d
             WHERE d.k OPERATOR(pg_catalog.<=) %s', items, t.user_cap);
    END IF;
    PERFORM seen_bloom._lock_users(t.filter_table, users);
    EXECUTE format('DELETE FROM %s WHERE user_key OPERATOR(pg_catalog.=) ANY ($1)', t.filter_table) USING users;
    EXECUTE format(
        'INSERT INTO %s (user_key, generation, layer, segment, bits)
         SELECT c.u, c.newest, -2, (r.n OPERATOR(pg_catalog.-) 1)::pg_catalog.int4, r.bits
         FROM (SELECT s.u, pg_catalog.max(s.gen) AS newest,
                      seen_bloom._compacted_rows(pg_catalog.array_agg(s.h), %s::pg_catalog.float8 OPERATOR(pg_catalog./) 2,
                                                 pg_catalog.min(s.gen), pg_catalog.max(s.gen)) AS rows
               FROM (%s) s
               WHERE s.gen IS NOT NULL
               GROUP BY s.u) c,
              pg_catalog.unnest(c.rows) WITH ORDINALITY AS r(bits, n)',
        t.filter_table, t.error_rate, items) USING users;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $$;
COMMENT ON FUNCTION seen_bloom._compact_users(seen_bloom.tracked, anyarray) IS
    'Internal: replaces these users'' filter rows by one compacted filter each (a row per part), built from their impressions of live generations; returns the rows written';

-- The users seen_bloom.compact rebuilds (column u): those with layered rows of a generation
-- that has closed (each active user once per generation: its window is rebuilt as one filter
-- sized for its items, DESIGN.md "Bytes per user"), those whose layered rows in the window pass
-- min_bytes, and those whose compacted row holds items of a generation that has left the
-- window (rebuilt without them). Shared by compact and the background worker.
CREATE OR REPLACE FUNCTION seen_bloom._compact_users_query(t seen_bloom.tracked, min_bytes bigint) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    oldest int := seen_bloom._oldest_live_generation(now(), t."window", t.generation_seconds);
    open_generation int := seen_bloom.generation_of(now(), t.generation_seconds);
BEGIN
    RETURN format(
        'SELECT user_key AS u FROM %s
         WHERE generation OPERATOR(pg_catalog.>=) %s
         GROUP BY user_key
         HAVING coalesce(pg_catalog.sum(pg_catalog.length(bits)) FILTER (WHERE layer OPERATOR(pg_catalog.<>) -2), 0) OPERATOR(pg_catalog.>) %s
             OR pg_catalog.bool_or(layer OPERATOR(pg_catalog.>=) -1 AND generation OPERATOR(pg_catalog.<) %s)
             OR pg_catalog.bool_or(CASE WHEN layer OPERATOR(pg_catalog.=) -2
                                        THEN seen_bloom._compacted_oldest(bits) OPERATOR(pg_catalog.<) %s ELSE false END)',
        t.filter_table, oldest, min_bytes, open_generation, oldest);
END $$;
COMMENT ON FUNCTION seen_bloom._compact_users_query(seen_bloom.tracked, bigint) IS 'Internal: the query of the users seen_bloom.compact rebuilds (compact, the background worker)';

CREATE OR REPLACE PROCEDURE seen_bloom.compact(impressions regclass, min_bytes bigint DEFAULT 65536)
LANGUAGE plpgsql AS $$
DECLARE
    t seen_bloom.tracked;
    users_sql pg_catalog.text;
    total pg_catalog.int8;
BEGIN
    -- Pinned per transaction, as in rebuild (a procedure that commits has no SET clause).
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._check_owner(impressions);
    IF min_bytes IS NULL OR min_bytes OPERATOR(pg_catalog.<) 0 THEN
        RAISE EXCEPTION 'seen_bloom.compact: min_bytes must be 0 or more, got %', coalesce(min_bytes::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NOT NULL THEN
        RAISE EXCEPTION 'seen_bloom.compact does not support Citus distributed tables'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Their users keep their layered rows.';
    END IF;
    IF t.layout OPERATOR(pg_catalog.=) 13 THEN
        RAISE EXCEPTION 'seen_bloom.compact: % is being moved to layout 3', impressions
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Finish the move first: CALL seen_bloom.relayout(%L).', impressions::text);
    END IF;
    IF pg_catalog.current_setting('transaction_read_only')::pg_catalog.bool THEN
        RAISE EXCEPTION 'seen_bloom.compact cannot run in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    -- (the background worker's maintenance of the table, or another compact, first; released
    -- at the end, or by the abort of a failed transaction)
    PERFORM seen_bloom._maintenance_lock(impressions, true);
    users_sql := seen_bloom._compact_users_query(t, min_bytes);
    CALL seen_bloom._each_user_batch(t, users_sql, '_compact_users', 100, pg_catalog.format('seen_bloom.compact(%s)', impressions), total);
    PERFORM seen_bloom._maintenance_unlock(impressions);
END $$;
COMMENT ON PROCEDURE seen_bloom.compact(regclass, bigint) IS
    'Rebuilds the window of each user with layered rows of a closed generation or over min_bytes as one filter sized for its items (from its impressions), and compacted rows holding expired generations; commits every 100 users with a NOTICE of progress; CALL it outside a transaction block, daily';

-- The maintenance lock of a tracked table (src/ops/maintenance_lock.rs): a session lock that
-- expire, compact and the background worker hold while they work on the table; the owner's.
CREATE OR REPLACE FUNCTION seen_bloom._maintenance_lock(impressions regclass, wait boolean) RETURNS boolean
    AS 'MODULE_PATHNAME', 'seen_bloom__maintenance_lock' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION seen_bloom._maintenance_lock(regclass, boolean) IS 'Internal: takes the table''s maintenance lock for the session (waiting, or false when held elsewhere); its owner only (expire, compact, the background worker)';
CREATE OR REPLACE FUNCTION seen_bloom._maintenance_unlock(impressions regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom__maintenance_unlock' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION seen_bloom._maintenance_unlock(regclass) IS 'Internal: releases one hold of the table''s maintenance lock by this session';

-- The tracked tables the background worker (src/ops/maintenance_worker.rs) maintains now:
-- those it has not run for in their open generation (so at least once per generation), the
-- longest waiting first. Forgets the runs of tables no longer tracked.
CREATE OR REPLACE FUNCTION seen_bloom._maintenance_due() RETURNS SETOF regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM seen_bloom.maintenance m WHERE NOT EXISTS (SELECT 1 FROM seen_bloom.tracked t WHERE t.impressions = m.impressions);
    RETURN QUERY
    SELECT t.impressions FROM seen_bloom.tracked t LEFT JOIN seen_bloom.maintenance m ON m.impressions = t.impressions
    WHERE m.last_generation IS NULL OR m.last_generation < seen_bloom.generation_of(now(), t.generation_seconds)
    ORDER BY m.last_run NULLS FIRST, t.impressions;
END $$;
COMMENT ON FUNCTION seen_bloom._maintenance_due() IS 'Internal: the tracked tables the background worker has not maintained in their open generation';
REVOKE EXECUTE ON FUNCTION seen_bloom._maintenance_due() FROM PUBLIC;

-- One step of the background worker's run on a table, each in a transaction of its own:
-- 'begin' (takes the maintenance lock without waiting: 'busy' when a manual run holds it),
-- 'expire', 'batches' (compact's users, 100 a line as a JSON array), 'compact' (one batch),
-- 'end' (records the run, releases the lock). expire and compact run as the table's owner,
-- as when called by hand; a step's error (statement_timeout too) is recorded, not raised (a
-- lock left held by a failed 'begin' goes with the worker's process, at the round's end).
CREATE OR REPLACE FUNCTION seen_bloom._maintain(impressions regclass, step text, arg text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    n bigint;
BEGIN
    SELECT * INTO t FROM seen_bloom.tracked x WHERE x.impressions = _maintain.impressions;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF step NOT IN ('begin', 'expire', 'batches', 'compact', 'end') THEN
        RAISE EXCEPTION 'seen_bloom._maintain: unknown step %', step USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        IF step = 'begin' THEN
            IF NOT seen_bloom._maintenance_lock(impressions, false) THEN
                RETURN 'busy';
            END IF;
            INSERT INTO seen_bloom.maintenance AS m (impressions, last_run_started) VALUES (impressions, clock_timestamp())
            ON CONFLICT ON CONSTRAINT maintenance_pkey
            DO UPDATE SET last_run_started = excluded.last_run_started, rows_expired = 0, users_compacted = 0;
            RETURN 'begun';
        ELSIF step = 'end' THEN
            UPDATE seen_bloom.maintenance m
            SET runs = m.runs + 1, last_run = clock_timestamp(),
                seconds = extract(epoch FROM clock_timestamp() - m.last_run_started),
                last_generation = seen_bloom.generation_of(m.last_run_started, t.generation_seconds)
            WHERE m.impressions = _maintain.impressions;
            PERFORM seen_bloom._maintenance_unlock(impressions);
            RETURN 'ended';
        ELSIF step = 'expire' THEN
            n := seen_bloom.expire(impressions);
            UPDATE seen_bloom.maintenance m SET rows_expired = m.rows_expired + n WHERE m.impressions = _maintain.impressions;
            RETURN n::text;
        ELSIF step = 'batches' THEN
            -- (compact refuses these: Citus tables keep their layered rows; a move finishes first)
            IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NOT NULL OR t.layout = 13 THEN
                RETURN '';
            END IF;
            RETURN coalesce(seen_bloom._as_owner(impressions, format(
                'SELECT pg_catalog.string_agg(pg_catalog.array_to_json(b.users)::pg_catalog.text, E''\n'') FROM (%s) b',
                seen_bloom._user_batches_query(seen_bloom._compact_users_query(t, 65536), 100))), '');
        ELSE
            PERFORM seen_bloom._as_owner(impressions,
                format('SELECT seen_bloom._compact_users(%L::seen_bloom.tracked, ARRAY(SELECT pg_catalog.json_array_elements_text($1::pg_catalog.json))::%s[])',
                       t, t.user_type),
                arg);
            n := json_array_length(arg::json);
            UPDATE seen_bloom.maintenance m SET users_compacted = m.users_compacted + n WHERE m.impressions = _maintain.impressions;
            RETURN n::text;
        END IF;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        UPDATE seen_bloom.maintenance m SET last_error = format('%s: %s %s', step, SQLSTATE, SQLERRM), last_error_at = clock_timestamp()
        WHERE m.impressions = _maintain.impressions;
        RETURN NULL;
    END;
END $$;
COMMENT ON FUNCTION seen_bloom._maintain(regclass, text, text) IS 'Internal: one step of the background worker''s maintenance of a table (begin, expire, batches, compact, end), recorded in seen_bloom.maintenance';
REVOKE EXECUTE ON FUNCTION seen_bloom._maintain(regclass, text, text) FROM PUBLIC;

-- A filter table read by the caller (stats, health) must be as track made it: an ordinary
-- table without rules or inheritance children, with the columns and types the queries expect, so that reading it runs
-- no one's code (a retyped column would bring its owner's casts and operators). 42501 without
-- SELECT on it, 55000 when it changed.
CREATE OR REPLACE FUNCTION seen_bloom._check_filter_table(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT has_table_privilege(t.filter_table, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied for table %', t.filter_table USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.filter_table AND (c.relkind <> 'r' OR c.relhassubclass))
       OR EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = t.filter_table)
       OR (SELECT count(*) FROM pg_attribute a
           WHERE a.attrelid = t.filter_table AND NOT a.attisdropped
             AND a.atttypid = CASE a.attname WHEN 'user_key' THEN t.user_type::oid WHEN 'generation' THEN 'int4'::regtype::oid
                                             WHEN 'layer' THEN 'int2'::regtype::oid WHEN 'segment' THEN 'int4'::regtype::oid
                                             WHEN 'bits' THEN 'bytea'::regtype::oid END) <> 5 THEN
        RAISE EXCEPTION '% is no longer a seen_bloom filter table as track made it (its kind, columns or rules changed)', t.filter_table
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Call seen_bloom.untrack(%L) and seen_bloom.track again.', t.impressions::text);
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._check_filter_table(seen_bloom.tracked) IS 'Internal: 42501 unless the caller may read the filter table, 55000 unless it is as track made it (stats, health)';

CREATE OR REPLACE FUNCTION seen_bloom.stats(impressions regclass)
RETURNS TABLE (users bigint, filter_rows bigint, total_bytes bigint, bytes_per_user_mean float8,
               bytes_per_user_max bigint, generations bigint, saturated_generations bigint,
               estimated_fpr_mean float8, estimated_fpr_max float8)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._check_filter_table(t);
    RETURN QUERY EXECUTE format(
        'WITH live AS (
             SELECT * FROM %1$s WHERE generation >= seen_bloom._oldest_live_generation(pg_catalog.now(), %2$L::interval, %3$s)),
         marked AS (SELECT user_key FROM live WHERE layer = -3),
         per_layer AS (
             SELECT user_key, generation, layer,
                    -- (The aggregate reads every row of the group: the test is inside it.)
                    CASE WHEN layer = -2 THEN max(CASE WHEN layer = -2 THEN seen_bloom._compacted_fpr(bits) END)
                         WHEN layer < 0 THEN 0
                         ELSE sum(seen_bloom._segment_fpr(bits) * (length(bits) / 32))
                              / seen_bloom._layer_blocks(%4$s, layer, seen_bloom._user_layout(%6$s, user_key IN (SELECT user_key FROM marked))) END AS fpr,
                    max(CASE WHEN layer < 0 THEN 0 ELSE seen_bloom._segment_fill(bits) END) AS max_fill
             FROM live GROUP BY 1, 2, 3),
         per_user AS (
             SELECT user_key, 1 - exp(sum(ln(greatest(1 - fpr, 1e-300)))) AS fpr,
                    count(DISTINCT generation) FILTER (WHERE layer >= -1) AS generations,
                    count(DISTINCT generation) FILTER (WHERE max_fill > 0.8 AND layer >= -1) AS saturated
             FROM per_layer GROUP BY 1),
         bytes AS (SELECT user_key, count(*) AS row_count, sum(pg_column_size(l.*)) AS row_bytes FROM %1$s l GROUP BY 1)
         SELECT count(*)::bigint, coalesce(sum(b.row_count), 0)::bigint,
                %7$s(%5$L)::bigint,
                %7$s(%5$L)::float8 / greatest(count(*), 1),
                coalesce(max(b.row_bytes), 0)::bigint,
                coalesce(sum(p.generations), 0)::bigint, coalesce(sum(p.saturated), 0)::bigint,
                coalesce(avg(p.fpr), 0)::float8, coalesce(max(p.fpr), 0)::float8
         FROM bytes b LEFT JOIN per_user p USING (user_key)',
        t.filter_table, t."window", t.generation_seconds, t.error_rate_per_generation, t.filter_table, t.layout,
        -- A distributed table's own relation holds nothing: its shards' sizes, summed by Citus.
        CASE WHEN (seen_bloom._citus_table_of(t.filter_table)).distributed IS NULL THEN 'pg_total_relation_size'
             ELSE 'citus_total_relation_size' END);
END $$;
COMMENT ON FUNCTION seen_bloom.stats(regclass) IS
    'Health of a tracked table: users, filter rows, total bytes (table and indexes), bytes per user (mean of the total; max of row bytes), live generations, saturated generations (a row over 80% full), estimated false-positive rate of users'' windows (mean, max)';


-- DDL on tracked tables (README, "Operating tracked tables"). The event triggers run as the
-- role whose DDL fired them (not SECURITY DEFINER), and do a table's work as its owner
-- through seen_bloom._as_owner, which asks that role for the owner's privileges: a role's
-- DDL can change only what that role could change itself.
CREATE OR REPLACE FUNCTION seen_bloom._ddl_start() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- Where each tracked column is before the command, so a RENAME is followed by number.
    PERFORM set_config('seen_bloom_ddl.columns', coalesce((
        SELECT json_agg(json_build_array(t.impressions::oid, u.attnum, i.attnum, w.attnum))::text
        FROM seen_bloom.tracked t
        LEFT JOIN pg_attribute u ON u.attrelid = t.impressions AND u.attname = t.user_column
        LEFT JOIN pg_attribute i ON i.attrelid = t.impressions AND i.attname = t.item_column
        LEFT JOIN pg_attribute w ON w.attrelid = t.impressions AND w.attname = t.time_column), '[]'), true);
    -- The partitions of tracked tables, so that one that leaves (DETACH PARTITION) is known.
    PERFORM set_config('seen_bloom_ddl.partitions', coalesce((
        SELECT json_agg(p.relid::oid)::text
        FROM seen_bloom.tracked t, pg_partition_tree(t.impressions) p
        WHERE p.relid <> t.impressions), '[]'), true);
END $$;
COMMENT ON FUNCTION seen_bloom._ddl_start() IS 'Internal: before ALTER TABLE, notes where each tracked column is and the partitions of tracked tables';

-- After ALTER TABLE of a tracked table: renamed columns are followed, a dropped or retyped
-- tracked column and a change that breaks the where predicate are refused.
CREATE OR REPLACE FUNCTION seen_bloom._follow_columns(t seen_bloom.tracked, before json) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    names name[] := ARRAY[t.user_column, t.item_column, t.time_column];
    roles text[] := ARRAY['user', 'item', 'time'];
    types regtype[] := ARRAY[t.user_type, t.item_type, 'timestamptz'::regtype];
    new_names name[] := names;
    new_item_type regtype := t.item_type;
    a record;
    k int;
BEGIN
    FOR k IN 1..3 LOOP
        CONTINUE WHEN names[k] IS NULL;
        IF before IS NOT NULL AND before->>k IS NOT NULL THEN
            SELECT attname, atttypid::regtype AS typ, attisdropped INTO a FROM pg_attribute
            WHERE attrelid = t.impressions AND attnum = (before->>k)::int2;
        ELSE
            SELECT attname, atttypid::regtype AS typ, attisdropped INTO a FROM pg_attribute
            WHERE attrelid = t.impressions AND attname = names[k];
        END IF;
        IF NOT FOUND OR a.attisdropped THEN
            RAISE EXCEPTION 'cannot drop column % of %: seen_bloom tracks it as the % column', names[k], t.impressions, roles[k]
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = format('Call seen_bloom.untrack(%L) first.', t.impressions::text);
        END IF;
        IF a.typ <> types[k] THEN
            IF k = 2 AND a.typ IN ('integer'::regtype, 'bigint'::regtype) AND types[k] IN ('integer'::regtype, 'bigint'::regtype) THEN
                new_item_type := a.typ;  -- integers of any width hash alike
            ELSIF k = 2 AND a.typ IN ('text'::regtype, 'character varying'::regtype) AND types[k] IN ('text'::regtype, 'character varying'::regtype) THEN
                new_item_type := a.typ;  -- the same bytes
            ELSIF k = 1 AND a.typ = 'integer'::regtype AND types[k] = 'bigint'::regtype THEN
                NULL;  -- integer users are kept as bigint
            ELSIF k = 3 AND a.typ = 'timestamp'::regtype THEN
                NULL;  -- read as UTC (seen_bloom._utc)
            ELSE
                RAISE EXCEPTION 'cannot change the type of column % of % to %: seen_bloom tracks it as the % column, of type %',
                                a.attname, t.impressions, a.typ, roles[k], types[k]
                    USING ERRCODE = 'feature_not_supported',
                          HINT = format('Call seen_bloom.untrack(%L), change the column, and seen_bloom.track again.', t.impressions::text);
            END IF;
        END IF;
        new_names[k] := a.attname;
    END LOOP;
    IF t."where" IS NOT NULL THEN
        BEGIN
            PERFORM seen_bloom._as_owner(t.impressions, format('SELECT seen_bloom._check_predicate($1, %s::pg_catalog.oid)', t.impressions::oid), t."where");
        EXCEPTION WHEN OTHERS THEN
            RAISE EXCEPTION 'this change to % breaks the where predicate of its seen_bloom tracking (%): %', t.impressions, t."where", SQLERRM
                USING ERRCODE = 'feature_not_supported',
                      HINT = format('Call seen_bloom.untrack(%L), make the change, and seen_bloom.track again with a predicate over the new columns.', t.impressions::text);
        END;
    END IF;
    IF new_names IS DISTINCT FROM names OR new_item_type <> t.item_type THEN
        t.user_column := new_names[1];
        t.item_column := new_names[2];
        t.time_column := new_names[3];
        t.item_type := new_item_type;
        PERFORM seen_bloom._write_tracked('update', t);
        -- The generated folds name the columns.
        PERFORM seen_bloom._create_functions(t);
        IF (seen_bloom._citus_table_of(t.impressions)).distributed IS NOT NULL THEN
            -- The workers' configuration is the insert trigger's argument (sql/citus.sql).
            PERFORM seen_bloom._citus_allow_triggers(t.impressions);
            EXECUTE format('DROP TRIGGER seen_bloom_insert ON %s', t.impressions);
            PERFORM seen_bloom._create_triggers(t, t.impressions);
        END IF;
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._follow_columns(seen_bloom.tracked, json) IS 'Internal: follows renamed tracked columns; refuses dropping or retyping them and breaking the where predicate';

-- After CREATE TABLE ... PARTITION OF, ATTACH PARTITION or DETACH PARTITION in a tracked
-- table's tree: a new partition gets the triggers and its rows in the window are folded; a
-- detached one loses the triggers (its rows stay seen until they leave the window or a
-- rebuild).
CREATE OR REPLACE FUNCTION seen_bloom._follow_partitions(rel oid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    p regclass;
    owner_role oid;
BEGIN
    t := seen_bloom._tracking_of(rel);
    IF t.impressions IS NULL THEN
        RETURN;
    END IF;
    SELECT c.relowner INTO owner_role FROM pg_class c WHERE c.oid = t.impressions;
    FOR p IN SELECT tr.relid FROM pg_partition_tree(t.impressions) tr
             WHERE tr.relid <> t.impressions
               AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = tr.relid AND g.tgname = 'seen_bloom_insert')
    LOOP
        -- The triggers by the role that made or attached the partition (its owner); its
        -- rows folded as the tracked table's owner (whose predicate it is), when that
        -- owner may read them.
        PERFORM seen_bloom._create_triggers(t, p);
        IF has_table_privilege(owner_role, p, 'SELECT') THEN
            PERFORM seen_bloom._as_owner(t.impressions, format('SELECT pg_catalog.count(*) FROM (%s) f', seen_bloom._fold_query(t, p::text)));
        ELSIF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = p AND c.reltuples <> 0) THEN
            RAISE WARNING 'seen_bloom: the rows of partition % are not folded into %: the owner of % may not read it', p, t.filter_table, t.impressions
                USING HINT = format('CALL seen_bloom.rebuild(%L);', t.impressions::text);
        END IF;
    END LOOP;
    -- A partition that left the tree (DETACH PARTITION; noted before the command by
    -- _ddl_start) keeps seen_bloom's triggers: taken off, as its owner. No other table is
    -- looked at: another role's table, with a trigger of that name or not, is never touched.
    FOR p IN SELECT g.tgrelid FROM pg_trigger g
             WHERE g.tgname = 'seen_bloom_insert'
               AND g.tgrelid IN (SELECT (x.value #>> '{}')::oid FROM json_array_elements(
                                     coalesce(nullif(current_setting('seen_bloom_ddl.partitions', true), ''), '[]')::json) x)
               AND (seen_bloom._tracking_of(g.tgrelid)).impressions IS NULL
    LOOP
        PERFORM seen_bloom._as_owner(p, 'SELECT seen_bloom._drop_triggers($1)', p);
        RAISE NOTICE 'seen_bloom: % left a tracked table; its impressions stay seen until they leave the window or a rebuild', p;
    END LOOP;
END $$;
COMMENT ON FUNCTION seen_bloom._follow_partitions(oid) IS 'Internal: gives a new partition of a tracked table its triggers and folds its rows; takes them from a detached one';

-- The filter table and the generated functions belong to the tracked table's owner: after
-- ALTER TABLE ... OWNER TO, they follow (the role that gave the table away owned them too).
-- Only functions of the former owner move, never another role's of the same name.
CREATE OR REPLACE FUNCTION seen_bloom._follow_owner(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    table_owner oid;
    filter_owner oid;
    filter_namespace oid;
    base text;
    f regprocedure;
BEGIN
    SELECT c.relowner INTO table_owner FROM pg_class c WHERE c.oid = t.impressions;
    SELECT c.relowner, c.relnamespace, seen_bloom._function_base(c.relname) INTO filter_owner, filter_namespace, base
    FROM pg_class c WHERE c.oid = t.filter_table;
    IF NOT FOUND OR filter_owner = table_owner THEN
        RETURN;
    END IF;
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = filter_namespace AND p.pronargs = 0 AND p.proowner = filter_owner
               AND p.prorettype = 'trigger'::regtype
               AND p.proname IN (base || '_fold', base || '_fold_row', base || '_truncate')
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', f, pg_get_userbyid(table_owner));
    END LOOP;
    EXECUTE format('ALTER TABLE %s OWNER TO %I', t.filter_table, pg_get_userbyid(table_owner));
END $$;
COMMENT ON FUNCTION seen_bloom._follow_owner(seen_bloom.tracked) IS 'Internal: gives a tracked table''s filter table and generated functions to the table''s owner';

CREATE OR REPLACE FUNCTION seen_bloom._ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel oid;
    t seen_bloom.tracked;
    before json;
BEGIN
    IF coalesce(current_setting('seen_bloom_ddl.busy', true), '') = 'on' THEN
        RETURN;  -- track, untrack or this trigger's own DDL
    END IF;
    -- A restore (pg_dump's scripts turn check_function_bodies off) brings the triggers itself;
    -- creating them here first would make its CREATE TRIGGER fail.
    IF current_setting('check_function_bodies') = 'off' THEN
        RETURN;
    END IF;
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    -- The fold writes filter rows straight into the heap, so a row trigger on a filter table
    -- (pg_repack's, an audit trigger) would never see them: refused.
    SELECT x.* INTO t FROM pg_event_trigger_ddl_commands() c
    JOIN pg_trigger g ON c.classid = 'pg_trigger'::regclass AND g.oid = c.objid
    JOIN seen_bloom.tracked x ON x.filter_table::oid = g.tgrelid
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot create a trigger on %, the seen_bloom filter table of %', t.filter_table, t.impressions
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The fold writes filter rows directly, without firing triggers; a trigger there (pg_repack''s, say) would miss them.',
                  HINT = 'Rewrite a filter table with VACUUM FULL or CLUSTER.';
    END IF;
    FOR rel IN SELECT DISTINCT c.objid FROM pg_event_trigger_ddl_commands() c
               WHERE c.classid = 'pg_class'::regclass AND c.object_type IN ('table', 'table column')
    LOOP
        SELECT * INTO t FROM seen_bloom.tracked x WHERE x.impressions = rel;
        IF FOUND THEN
            PERFORM seen_bloom._citus_check_renamed(t);
            SELECT s INTO before
            FROM json_array_elements(coalesce(nullif(current_setting('seen_bloom_ddl.columns', true), ''), '[]')::json) s
            WHERE (s->>0)::oid = rel;
            PERFORM seen_bloom._follow_columns(t, before);
            PERFORM seen_bloom._follow_owner(t);
        END IF;
        PERFORM seen_bloom._follow_partitions(rel);
    END LOOP;
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
END $$;
COMMENT ON FUNCTION seen_bloom._ddl_end() IS 'Internal: after ALTER TABLE or CREATE TABLE, keeps tracking in step with tracked tables and their partitions';

-- DROP TABLE (DROP SCHEMA ... CASCADE, DROP OWNED) of a tracked table drops its tracking; a
-- filter table dropped on its own while its table is tracked is refused.
CREATE OR REPLACE FUNCTION seen_bloom._ddl_drop() RETURNS event_trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    tracked_table regclass;
    dropped text;
BEGIN
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    FOR t IN SELECT x.* FROM seen_bloom.tracked x
             WHERE x.impressions::oid IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                                          WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
    LOOP
        PERFORM seen_bloom._write_tracked('delete', t);
        -- The filter table goes as its owner, and only by a role holding that owner's
        -- privileges: a row naming another role's table (written by someone granted DML on
        -- seen_bloom.tracked by mistake) leaves that table alone.
        IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.filter_table AND NOT pg_has_role(c.relowner, 'USAGE')) THEN
            RAISE WARNING 'seen_bloom: % is left in place: it belongs to a role whose privileges % does not hold', t.filter_table, current_user;
        ELSE
            PERFORM seen_bloom._drop_tracking(t);
        END IF;
    END LOOP;
    -- A retrack's filter table went with its table (linked).
    PERFORM seen_bloom._write_tracked('delete next', ROW(x.*)::seen_bloom.tracked)
    FROM seen_bloom.retracking x
    WHERE x.impressions::oid IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                                 WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0);
    SELECT x.impressions, d.object_identity INTO tracked_table, dropped FROM seen_bloom.tracked x
    JOIN pg_event_trigger_dropped_objects() d
      ON d.classid = 'pg_class'::regclass AND d.objsubid = 0 AND d.objid = x.filter_table::oid;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop %: it holds the seen_bloom filter rows of %', dropped, tracked_table
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = format('Call seen_bloom.untrack(%L) to stop tracking.', tracked_table::text);
    END IF;
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
END $$;
COMMENT ON FUNCTION seen_bloom._ddl_drop() IS 'Internal: drops the tracking of dropped tables; refuses dropping a filter table in use';

COMMENT ON EVENT TRIGGER seen_bloom_ddl_start IS 'seen_bloom: notes where tracked columns are before ALTER TABLE';
COMMENT ON EVENT TRIGGER seen_bloom_ddl_end IS 'seen_bloom: follows renames of tracked columns and new or detached partitions; refuses dropping or retyping tracked columns and triggers on filter tables';
COMMENT ON EVENT TRIGGER seen_bloom_ddl_drop IS 'seen_bloom: a dropped tracked table takes its tracking along; a filter table in use cannot be dropped alone';

-- (Re)creates the triggers and generated functions of a tracked table and its partitions
-- (track calls it to make them the first time).
CREATE OR REPLACE FUNCTION seen_bloom.repair_triggers(impressions regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._check_owner(impressions);
    -- The DDL below is this function's own: the DDL event trigger leaves it alone.
    PERFORM set_config('seen_bloom_ddl.busy', 'on', true);
    -- A table tracked before 0.5.0 by another role than its owner (a superuser, say) has a
    -- filter table and functions of that role: given to the table's owner first (which
    -- takes a role that may give them: their owner, or a superuser).
    PERFORM seen_bloom._follow_owner(t);
    PERFORM seen_bloom._make_tracking(t);
    -- pg_dump and pg_upgrade do not carry the link of the filter table to its table.
    PERFORM seen_bloom._link('pg_class', t.filter_table, t.impressions)
    WHERE EXISTS (SELECT 1 FROM pg_class f JOIN pg_class c ON c.oid = t.impressions WHERE f.oid = t.filter_table AND f.relowner = c.relowner);
    PERFORM set_config('seen_bloom_ddl.busy', '', true);
END $$;
COMMENT ON FUNCTION seen_bloom.repair_triggers(regclass) IS
    'Recreates the missing triggers and the generated trigger functions of a tracked table and its partitions as their owners, and gives the filter table and functions to the table''s owner (after an update, or triggers dropped by hand); impressions inserted meanwhile need seen_bloom.rebuild';

-- One row per problem of a tracked table, with what to do about it.
CREATE OR REPLACE FUNCTION seen_bloom.health()
RETURNS TABLE (impressions regclass, problem text, fix text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    cfg seen_bloom.tracked;
    oldest int;
    n bigint;
    fpr float8;
    dead bigint;
    live bigint;
    stale bigint;
    ahead bigint;
    err text;
BEGIN
    -- Triggers missing or disabled: impressions that would not be folded.
    RETURN QUERY
    SELECT t.impressions,
           CASE WHEN g.tgenabled = 'O' AND w.name = 'seen_bloom_replica'
                THEN format('trigger %s on %s fires in ordinary sessions only: rows applied by logical replication are not folded', w.name, r.rel)
                ELSE format('trigger %s on %s is %s: its impressions are not folded',
                            w.name, r.rel, CASE WHEN g.tgenabled IS NULL THEN 'missing' ELSE 'disabled' END) END,
           CASE WHEN g.tgenabled = 'O' AND w.name = 'seen_bloom_replica'
                THEN format('ALTER TABLE %s ENABLE REPLICA TRIGGER %s;', r.rel, w.name)
                WHEN g.tgenabled IS NULL
                THEN format('SELECT seen_bloom.repair_triggers(%L); then CALL seen_bloom.rebuild(%L);', t.impressions::text, t.impressions::text)
                ELSE format('ALTER TABLE %s ENABLE %sTRIGGER %s; then CALL seen_bloom.rebuild(%L);', r.rel,
                            CASE WHEN w.name = 'seen_bloom_replica' THEN 'REPLICA ' ELSE '' END, w.name, t.impressions::text) END
    FROM seen_bloom.tracked t
    CROSS JOIN LATERAL (SELECT tr AS rel, tr = t.impressions AS is_root
                        FROM seen_bloom._tracked_relations(t.impressions) tr) r
    CROSS JOIN LATERAL (VALUES ('seen_bloom_insert', 'O'), ('seen_bloom_update', 'O'),
                               ('seen_bloom_truncate', 'O'), ('seen_bloom_replica', 'R')) w(name, wanted)
    LEFT JOIN pg_trigger g ON g.tgrelid = r.rel AND g.tgname = w.name
    WHERE (w.name <> 'seen_bloom_truncate' OR r.is_root)
      AND (g.tgenabled IS NULL OR g.tgenabled NOT IN (w.wanted, 'A'))
    ORDER BY 1, 2;

    -- Tables in the ownership model before 0.5.0: a filter table or generated function that
    -- is not the tracked table's owner's (the folds refuse to write such a filter table).
    RETURN QUERY
    SELECT t.impressions,
           format('the filter table %s or its generated functions belong to %s, not to %s, the owner of %s',
                  t.filter_table, pg_get_userbyid(f.relowner), pg_get_userbyid(c.relowner), t.impressions),
           format('SELECT seen_bloom.repair_triggers(%L); (as a superuser, or a member of both roles)', t.impressions::text)
    FROM seen_bloom.tracked t
    JOIN pg_class c ON c.oid = t.impressions
    JOIN pg_class f ON f.oid = t.filter_table
    WHERE f.relowner <> c.relowner
       OR EXISTS (SELECT 1 FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
                  WHERE g.tgrelid = t.impressions AND g.tgname LIKE 'seen_bloom\_%' AND p.prolang <> 13
                    AND p.proowner <> c.relowner)
    ORDER BY 1;

    -- A move to layout 3 not finished (stopped, or running now).
    RETURN QUERY
    SELECT t.impressions,
           format('%s is being moved from layout 1 to layout 3: its users not yet moved are read in layout 1, and compact refuses it', t.impressions),
           format('CALL seen_bloom.relayout(%L); (if no relayout of it is running)', t.impressions::text)
    FROM seen_bloom.tracked t WHERE t.layout = 13 ORDER BY 1;

    -- A retrack not finished (stopped, or running now): inserts fold into two filter tables.
    RETURN QUERY
    SELECT t.impressions,
           format('a retrack of %s to window %s, %s generations, error rate %s is not finished: inserts are folded into %s as well, and reads keep the old settings',
                  t.impressions, n."window", n.generations, n.error_rate, n.filter_table),
           format('CALL seen_bloom.retrack(%L, ...); (if none is running) to start it again, or SELECT seen_bloom.untrack(%L); and track again', t.impressions::text, t.impressions::text)
    FROM seen_bloom.tracked t JOIN seen_bloom.retracking n ON n.impressions = t.impressions ORDER BY 1;

    -- The filter rows themselves (one scan of each filter table).
    -- (The filter tables the caller may read: the checks read them as the caller.)
    FOR cfg IN SELECT * FROM seen_bloom.tracked x
               WHERE to_regclass(x.filter_table::text) IS NOT NULL AND has_table_privilege(x.filter_table, 'SELECT')
               ORDER BY x.impressions LOOP
        BEGIN
            PERFORM seen_bloom._check_filter_table(cfg);
        EXCEPTION WHEN object_not_in_prerequisite_state THEN
            impressions := cfg.impressions;
            problem := SQLERRM;
            fix := format('Call seen_bloom.untrack(%L) and seen_bloom.track again.', cfg.impressions::text);
            RETURN NEXT;
            CONTINUE;
        END;
        oldest := seen_bloom._oldest_live_generation(now(), cfg."window", cfg.generation_seconds);
        -- Users whose estimated false-positive rate is over the configured one (stats'
        -- estimate, from the rows' fill): layers grown past their first, not yet compacted.
        SELECT st.saturated_generations, st.estimated_fpr_max INTO n, fpr FROM seen_bloom.stats(cfg.impressions) st;
        IF n > 0 OR fpr > cfg.error_rate THEN
            impressions := cfg.impressions;
            problem := format('users over the error rate: %s saturated generations, estimated false-positive rate up to %s (configured %s)',
                              n, round(fpr::numeric, 4), cfg.error_rate);
            -- capacity sizes no filter row (layers grow as items come): compact's filters are
            -- sized for each user's items.
            fix := format('CALL seen_bloom.compact(%L, min_bytes => 0); (outside a transaction block) rebuilds each user''s window as one filter sized for its items.', cfg.impressions::text);
            RETURN NEXT;
        END IF;
        -- Users at the per-user cap (seen_bloom.set_user_cap) in a live generation: their
        -- impressions past it are not folded, and may be served again.
        IF cfg.user_cap IS NOT NULL THEN
            EXECUTE format('SELECT count(DISTINCT user_key) FROM %s
                            WHERE generation >= %s AND layer >= -1
                              AND seen_bloom._at_cap(%s, seen_bloom._user_layout(%s, true), %s, layer, bits)',
                           cfg.filter_table, oldest, cfg.error_rate_per_generation, cfg.layout, cfg.user_cap) INTO n;
            IF n > 0 THEN
                impressions := cfg.impressions;
                problem := format('%s users reached the per-user cap of %s items in a generation: their later impressions of it are not folded (seen_bloom.activity counts them) and may be served again',
                                  n, cfg.user_cap);
                fix := format('None if these are bots or binges (the cap at work). If real users reach it, raise it: SELECT seen_bloom.set_user_cap(%L, %s); (no rows move; it applies from the commit on)',
                              cfg.impressions::text, cfg.user_cap * 2);
                RETURN NEXT;
            END IF;
        END IF;
        -- Rows of generations that left the window more than a generation ago: expire has
        -- not run for longer than a generation (reads skip them; they only take room). Rows
        -- of generations more than one ahead of now's: impressions dated in the future, which
        -- are folded as dated and stay seen until their generation leaves the window.
        EXECUTE format('SELECT count(*) FILTER (WHERE generation < %s),
                               count(DISTINCT user_key) FILTER (WHERE generation > %s AND layer <> -3)
                        FROM %s',
                       oldest - 1, seen_bloom.generation_of(now(), cfg.generation_seconds) + 1, cfg.filter_table) INTO n, ahead;
        IF n > 0 THEN
            impressions := cfg.impressions;
            problem := format('%s filter rows of generations that left the window more than a generation ago: expire has not run', n);
            fix := format('SELECT seen_bloom.expire(%L); then let the background worker run it (seen_bloom in shared_preload_libraries, seen_bloom.maintenance on) or schedule it at least once per generation (%s s), e.g. with pg_cron.',
                          cfg.impressions::text, cfg.generation_seconds);
            RETURN NEXT;
        END IF;
        -- The background worker's last run on the table failed (seen_bloom.maintenance).
        SELECT m.last_error INTO err FROM seen_bloom.maintenance m
        WHERE m.impressions = cfg.impressions AND m.last_error_at >= m.last_run_started;
        IF err IS NOT NULL THEN
            impressions := cfg.impressions;
            problem := format('the background maintenance''s last run failed at %s', err);
            fix := format('See seen_bloom.maintenance; run that step by hand for the whole error (SELECT seen_bloom.expire(%L); or CALL seen_bloom.compact(%L);) and fix its cause: the worker tries again next generation.',
                          cfg.impressions::text, cfg.impressions::text);
            RETURN NEXT;
        END IF;
        IF ahead > 0 THEN
            impressions := cfg.impressions;
            problem := format('%s users have impressions dated more than a generation (%s s) after now: they stay seen until that date leaves the window', ahead, cfg.generation_seconds);
            fix := format('Correct the times of those rows of %s, then CALL seen_bloom.rebuild(%L); (outside a transaction block).',
                          cfg.impressions, cfg.impressions::text);
            RETURN NEXT;
        END IF;
        -- Heavy users left in layers (4 times compact's default min_bytes: a user of 100,000
        -- items held 9.8 times the bytes of its compacted row), and compacted rows holding a
        -- generation that left the window more than a generation ago: compact has not run.
        EXECUTE format('SELECT count(*) FILTER (WHERE s.layered > 262144), count(*) FILTER (WHERE s.stale)
                        FROM (SELECT sum(length(bits)) FILTER (WHERE layer <> -2 AND generation >= %s) AS layered,
                                     bool_or(CASE WHEN layer = -2 THEN seen_bloom._compacted_oldest(bits) < %s ELSE false END) AS stale
                              FROM %s GROUP BY user_key) s', oldest, oldest - 1, cfg.filter_table) INTO n, stale;
        IF n > 0 OR stale > 0 THEN
            impressions := cfg.impressions;
            problem := CASE WHEN n > 0 THEN format('%s users hold more than 256 KB of layered filter rows', n) END;
            problem := concat_ws('; ', problem,
                                 CASE WHEN stale > 0 THEN format('%s users have a compacted row holding generations that left the window more than a generation ago', stale) END);
            fix := format('CALL seen_bloom.compact(%L); then let the background worker run it (seen_bloom in shared_preload_libraries, seen_bloom.maintenance on) or schedule it daily, e.g. with pg_cron.', cfg.impressions::text);
            RETURN NEXT;
        END IF;
        -- Dead versions left by the folds' updates pile up when nothing vacuums the table:
        -- autovacuum off for it, or no vacuum for a day (after a bulk load, before
        -- autovacuum's first visit, many dead versions are normal).
        dead := pg_stat_get_dead_tuples(cfg.filter_table);
        live := pg_stat_get_live_tuples(cfg.filter_table);
        IF dead > 10000 AND dead > 4 * live
           AND (NOT current_setting('autovacuum')::boolean
                OR EXISTS (SELECT 1 FROM pg_class c, pg_options_to_table(c.reloptions) o
                            WHERE c.oid = cfg.filter_table AND o.option_name = 'autovacuum_enabled'
                              AND NOT o.option_value::boolean)
                OR greatest(pg_stat_get_last_vacuum_time(cfg.filter_table),
                            pg_stat_get_last_autovacuum_time(cfg.filter_table)) < now() - interval '1 day') THEN
            impressions := cfg.impressions;
            problem := format('the filter table %s has %s dead row versions for %s live ones, and nothing vacuums it', cfg.filter_table, dead, live);
            fix := format('VACUUM %s; and let autovacuum run on it (autovacuum on, autovacuum_enabled not false).', cfg.filter_table);
            RETURN NEXT;
        END IF;
    END LOOP;
END $$;
COMMENT ON FUNCTION seen_bloom.health() IS 'Problems of tracked tables, one row each with the fix: missing or disabled triggers (impressions that would not be folded), a move to layout 3 or a retrack not finished, users with saturated generations, users at the per-user cap, expire not run for over a generation, a failed background maintenance run, impressions dated more than a generation ahead, heavy users not compacted or compacted rows gone stale, a filter table with many dead rows that nothing vacuums';
GRANT EXECUTE ON FUNCTION seen_bloom.health() TO PUBLIC;

-- seen_bloom on Citus (docs/SCALING.md): an impressions table hash-distributed by its user
-- column, its filter table distributed with it (co-located: same shard count and hash
-- ranges, so a user's impressions and filter rows share one worker). Each node resolves its
-- own relations, whose OIDs differ from node to node. The coordinator keeps the
-- seen_bloom.tracked row. A worker keeps none: it reads the configuration from the one
-- argument of the seen_bloom_insert trigger of the distributed table's relation on that node
-- (its "shell", which holds no rows), which Citus copies verbatim to every node, nodes added
-- later included, and to every shard, in the transaction of the DDL.
-- Every function here is PL/pgSQL: Citus' catalogs and functions exist only where Citus is
-- installed, and PL/pgSQL resolves them when a statement first runs.

-- Whether Citus is installed in this database.
CREATE OR REPLACE FUNCTION seen_bloom._citus() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_extension e WHERE e.extname = 'citus')
$$;
COMMENT ON FUNCTION seen_bloom._citus() IS 'Internal: whether Citus is installed in this database';

-- The Citus table of `rel` on this node: (rel, NULL) for a distributed table, (its
-- distributed table, the shard id) for a shard, NULLs otherwise. A shard is named
-- <table>_<shard id> (Citus keeps the suffix when it shortens a long name); the name is
-- read from the syscache through regclass, as Citus hides shards from SQL over pg_class.
CREATE OR REPLACE FUNCTION seen_bloom._citus_table_of(rel regclass, OUT distributed regclass, OUT shard bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    name text[];
    suffix bigint;
BEGIN
    IF rel IS NULL OR NOT seen_bloom._citus() THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = rel) THEN
        distributed := rel;
        RETURN;
    END IF;
    name := parse_ident(rel::text);
    suffix := substring(name[cardinality(name)] FROM '_([0-9]{1,18})$')::bigint;
    SELECT s.logicalrelid, s.shardid INTO distributed, shard FROM pg_dist_shard s
     WHERE s.shardid = suffix AND seen_bloom._citus_shard_relation(s.logicalrelid, s.shardid) = rel;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_table_of(regclass) IS 'Internal: the Citus distributed table of a relation on this node, and its shard id when the relation is a shard';

-- The relation of shard `shard` of `distributed` on this node (shards share their table's
-- schema), NULL when there is none.
-- (The schema comes from the table's qualified name, which regclass gives from the syscache
-- under this search_path: SQL over pg_class is what the fold and the reads never run.)
CREATE OR REPLACE FUNCTION seen_bloom._citus_shard_relation(distributed regclass, shard bigint) RETURNS regclass
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    name text[] := parse_ident(shard_name(distributed, shard));
    table_name text[] := parse_ident(distributed::text);
BEGIN
    RETURN to_regclass(format('%I.%I', CASE WHEN cardinality(table_name) > 1 THEN table_name[1] ELSE 'pg_catalog' END,
                              name[cardinality(name)]));
END $$;
COMMENT ON FUNCTION seen_bloom._citus_shard_relation(regclass, bigint) IS 'Internal: the relation of a Citus shard on this node, NULL when none';

-- The relation of shard `shard` of `distributed` when its placement is on this node, else
-- NULL. The placement, not the relation, decides: after a shard move the old relation
-- lingers until Citus' deferred cleanup drops it.
CREATE OR REPLACE FUNCTION seen_bloom._citus_local_shard(distributed regclass, shard bigint) RETURNS regclass
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_dist_placement p JOIN pg_dist_local_group g ON g.groupid = p.groupid
                   WHERE p.shardid = shard) THEN
        RETURN NULL;
    END IF;
    RETURN seen_bloom._citus_shard_relation(distributed, shard);
END $$;
COMMENT ON FUNCTION seen_bloom._citus_local_shard(regclass, bigint) IS 'Internal: the relation of a Citus shard whose placement is on this node, NULL otherwise';

-- Whether `rel` is a Citus distributed table; if so, this transaction may create and drop
-- its triggers, one shard after another: Citus asks for citus.enable_unsafe_triggers as it does not check what a
-- trigger touches (seen_bloom's touch only the co-located shard of the filter table).
CREATE OR REPLACE FUNCTION seen_bloom._citus_allow_triggers(rel regclass) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (seen_bloom._citus_table_of(rel)).distributed IS NULL THEN
        RETURN false;
    END IF;
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    -- track and untrack also create and drop functions on the workers, which Citus refuses
    -- after a parallel operation in the transaction.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    RETURN true;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_allow_triggers(regclass) IS 'Internal: whether a relation is a Citus distributed table, allowing this transaction to change its triggers if so';

-- The configuration a distributed tracked table's seen_bloom_insert trigger carries: its
-- seen_bloom.tracked row without the impressions table, as JSON (names, not OIDs).
CREATE OR REPLACE FUNCTION seen_bloom._citus_trigger_config(t seen_bloom.tracked) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (to_jsonb(t) - 'impressions' - 'tracked_at')::text
$$;
COMMENT ON FUNCTION seen_bloom._citus_trigger_config(seen_bloom.tracked) IS 'Internal: the configuration argument of a distributed tracked table''s insert trigger';

-- The configuration of `rel` on a node without a seen_bloom.tracked row for it (a Citus
-- worker), NULL when it has none: for a shard of a distributed tracked table, with the
-- co-located filter shard on this node (55000 when it is elsewhere); for the distributed
-- table's relation on this node, with the distributed filter table (reads then go to the
-- user's shard, see src/citus.rs).
CREATE OR REPLACE FUNCTION seen_bloom._citus_config(rel regclass) RETURNS seen_bloom.tracked
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
    args bytea;
    t seen_bloom.tracked;
    filter_shard bigint;
BEGIN
    c := seen_bloom._citus_table_of(rel);
    IF c.distributed IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT g.tgargs INTO args FROM pg_trigger g
     WHERE g.tgrelid = c.distributed AND g.tgname = 'seen_bloom_insert' AND g.tgfoid = 'seen_bloom._fold_trigger'::regproc;
    IF NOT FOUND THEN
        RETURN NULL;
    ELSIF length(args) = 0 THEN
        RAISE EXCEPTION '% was distributed by Citus after seen_bloom.track', c.distributed
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Call seen_bloom.untrack and seen_bloom.track again on the coordinator: track distributes the filter table with it.';
    END IF;
    -- tgargs holds each argument followed by a NUL byte.
    t := jsonb_populate_record(NULL::seen_bloom.tracked,
                               convert_from(substring(args FROM 1 FOR length(args) - 1), 'UTF8')::jsonb);
    t.impressions := rel;
    IF c.shard IS NOT NULL THEN
        SELECT f.shardid INTO filter_shard
          FROM pg_dist_shard i JOIN pg_dist_shard f ON f.logicalrelid = t.filter_table AND f.shardminvalue = i.shardminvalue
         WHERE i.shardid = c.shard;
        t.filter_table := seen_bloom._citus_local_shard(t.filter_table, filter_shard);
        IF t.filter_table IS NULL THEN
            RAISE EXCEPTION 'the filter shard co-located with % is not on this node', rel
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Keep the filter table co-located with the impressions table (colocate_with).';
        END IF;
    END IF;
    RETURN t;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_config(regclass) IS 'Internal: the tracking configuration of a Citus shard or distributed table on a node without a seen_bloom.tracked row';

-- Whether `filter` is a shard, on this node, of the filter table of a tracked distributed
-- table with that error rate (a fold may write it: src/fold.rs, check_fold_target).
CREATE OR REPLACE FUNCTION seen_bloom._citus_filter_registered(filter regclass, error_rate_per_generation float8) RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c record;
BEGIN
    c := seen_bloom._citus_table_of(filter);
    IF c.shard IS NULL OR seen_bloom._citus_local_shard(c.distributed, c.shard) IS DISTINCT FROM filter THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM seen_bloom.tracked x
               WHERE x.filter_table = c.distributed AND x.error_rate_per_generation = _citus_filter_registered.error_rate_per_generation) THEN
        RETURN true;
    END IF;
    -- The insert triggers of this node's tables that call seen_bloom's trigger. (One that
    -- does not parse still fails this for every fold of the node: catching it would take a
    -- subtransaction, which Citus cannot run in the middle of a distributed statement.)
    RETURN EXISTS (SELECT 1 FROM pg_trigger g, seen_bloom._citus_config(g.tgrelid) t
                    WHERE g.tgname = 'seen_bloom_insert' AND g.tgnargs = 1 AND g.tgfoid = 'seen_bloom._fold_trigger'::regproc
                      AND t.filter_table = c.distributed
                      AND t.error_rate_per_generation = _citus_filter_registered.error_rate_per_generation);
END $$;
COMMENT ON FUNCTION seen_bloom._citus_filter_registered(regclass, float8) IS 'Internal: whether a relation is a local shard of a tracked distributed table''s filter table';

-- Refuses to track a Citus table that seen_bloom cannot serve: only a hash-distributed
-- table whose distribution column is the user column, without a `where` predicate (its
-- SQL trigger cannot reach the filter shard), while it is empty (backfill would have to
-- run on every shard in transactions of their own).
CREATE OR REPLACE FUNCTION seen_bloom._citus_check_trackable(impressions regclass, user_column name, "where" text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    method char;
    column_name text;
    has_rows boolean;
BEGIN
    -- Creating functions on the workers needs one connection per node for the whole
    -- transaction (Citus refuses it after a parallel operation); for the rest of track's
    -- transaction.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
    SELECT p.partmethod, column_to_column_name(p.logicalrelid, p.partkey) INTO method, column_name
      FROM pg_dist_partition p WHERE p.logicalrelid = impressions;
    IF method IS DISTINCT FROM 'h' THEN
        RAISE EXCEPTION 'seen_bloom.track: % is a Citus table that is not hash-distributed', impressions
            USING ERRCODE = 'feature_not_supported',
                  HINT = format('Distribute it by the user column: SELECT create_distributed_table(%L, %L).', impressions::text, user_column);
    ELSIF column_name IS DISTINCT FROM user_column THEN
        RAISE EXCEPTION 'seen_bloom.track: % is distributed by %, not by the user column %', impressions, column_name, user_column
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A user''s filter rows live beside the user''s impressions: distribute the table by the user column.';
    ELSIF "where" IS NOT NULL THEN
        RAISE EXCEPTION 'seen_bloom.track: a where predicate is not supported on a Citus distributed table'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', impressions) INTO has_rows;
    IF has_rows THEN
        RAISE EXCEPTION 'seen_bloom.track: the distributed table % already has rows', impressions
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Track it while it is empty, then load it; or track a new distributed table and INSERT ... SELECT the rows into it.';
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_check_trackable(regclass, name, text) IS 'Internal: refuses a Citus table that tracking cannot serve';

-- The delegated read functions of a distributed tracked table, one row each, in its schema:
-- <impressions>_unseen("user", candidates anyarray) and <impressions>_has_seen("user", item
-- anyelement): name, signature (for regprocedure), parameters, result type, the call it makes
-- and what it answers. The one place that names them.
CREATE OR REPLACE FUNCTION seen_bloom._citus_read_functions(impressions regclass, user_type regtype,
                                                 OUT name text, OUT signature text, OUT parameters text,
                                                 OUT returns text, OUT call text, OUT answers text)
RETURNS SETOF record LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel record;
    base text;
    f record;
BEGIN
    SELECT c.relname, n.nspname INTO rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = impressions;
    IF NOT FOUND THEN
        -- DROP TABLE: the table's names are in the event's dropped objects.
        SELECT d.object_name AS relname, d.schema_name AS nspname INTO rel FROM pg_event_trigger_dropped_objects() d
         WHERE d.classid = 'pg_class'::regclass AND d.objid = impressions AND d.objsubid = 0;
    END IF;
    base := seen_bloom._cut_to_bytes(rel.relname, 63 - 9);
    FOR f IN SELECT * FROM (VALUES
        ('_unseen', 'candidates anyarray', 'anyarray', 'seen_bloom.unseen', 'candidates',
         'the candidates the user has not seen'),
        ('_has_seen', 'item anyelement', 'boolean', 'seen_bloom.has_seen', 'item',
         'whether the user has probably seen the item')) v(suffix, parameter, returns, function, argument, answers)
    LOOP
        name := format('%I.%I', rel.nspname, base || f.suffix);
        signature := format('%s(%s, %s)', name, user_type, split_part(f.parameter, ' ', 2));
        parameters := format('"user" %s, %s', user_type, f.parameter);
        returns := f.returns;
        call := format('%s(%L::pg_catalog.regclass, "user", %s)', f.function, impressions, f.argument);
        answers := f.answers;
        RETURN NEXT;
    END LOOP;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_read_functions(regclass, regtype) IS 'Internal: the delegated read functions of a distributed tracked table';

-- Distributes the filter table of a tracked distributed table with it, and creates the
-- read functions that Citus delegates to the worker holding the user: a top-level
-- SELECT <impressions>_unseen($1, $2) runs there in one round trip, in a transaction block
-- too (force_delegation). They are PL/pgSQL: a SQL function would be inlined, never
-- delegated.
CREATE OR REPLACE FUNCTION seen_bloom._citus_distribute(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
BEGIN
    PERFORM create_distributed_table(t.filter_table, 'user_key', colocate_with := t.impressions::text);
    FOR f IN SELECT * FROM seen_bloom._citus_read_functions(t.impressions, t.user_type) LOOP
        EXECUTE format('CREATE FUNCTION %s(%s) RETURNS %s LANGUAGE plpgsql STABLE AS %L',
                       f.name, f.parameters, f.returns, format('BEGIN RETURN %s; END', f.call));
        EXECUTE format('COMMENT ON FUNCTION %s IS %L', f.signature,
                       format('seen_bloom: %s in %s (delegated by Citus to the user''s worker)', f.answers, t.impressions));
        PERFORM create_distributed_function(f.signature::regprocedure, '$1', colocate_with := t.impressions::text,
                                            force_delegation := true);
    END LOOP;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_distribute(seen_bloom.tracked) IS 'Internal: distributes a tracked distributed table''s filter table and creates its delegated read functions';

-- Drops the delegated read functions of a distributed tracked table.
CREATE OR REPLACE FUNCTION seen_bloom._citus_drop_read_functions(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT * FROM seen_bloom._citus_read_functions(t.impressions, t.user_type) LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %s', f.signature);
    END LOOP;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_drop_read_functions(seen_bloom.tracked) IS 'Internal: drops a distributed tracked table''s delegated read functions';

-- Refuses RENAME TO and SET SCHEMA of a distributed tracked table (ALTER TABLE's event
-- trigger calls it): its delegated read functions are named after it and name it in their
-- bodies, and the workers resolve those names.
CREATE OR REPLACE FUNCTION seen_bloom._citus_check_renamed(t seen_bloom.tracked) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (seen_bloom._citus_table_of(t.filter_table)).distributed IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM seen_bloom._citus_read_functions(t.impressions, t.user_type) f
               WHERE to_regprocedure(f.signature) IS NULL) THEN
        RAISE EXCEPTION 'cannot rename % or move it to another schema: it is a distributed table tracked by seen_bloom', t.impressions
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Call seen_bloom.untrack first, rename, and seen_bloom.track again (while the table is empty), or keep the name.';
    END IF;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_check_renamed(seen_bloom.tracked) IS 'Internal: refuses renaming a distributed tracked table or moving it to another schema';

-- Runs `command` on every co-located pair of (impressions shard, filter shard) placements,
-- %1$s and %2$s in it naming the pair; each placement commits on its own. Raises the first
-- failure.
CREATE OR REPLACE FUNCTION seen_bloom._citus_on_placements(t seen_bloom.tracked, command text) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    total bigint := 0;
BEGIN
    FOR r IN SELECT * FROM run_command_on_colocated_placements(t.impressions, t.filter_table, command) LOOP
        IF NOT r.success THEN
            RAISE EXCEPTION 'seen_bloom: on %:% (shards % and %): %', r.nodename, r.nodeport, r.shardid1, r.shardid2, r.result
                USING ERRCODE = 'external_routine_exception';
        END IF;
        total := total + coalesce(nullif(r.result, '')::bigint, 0);
    END LOOP;
    RETURN total;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_on_placements(seen_bloom.tracked, text) IS 'Internal: runs a command on each co-located shard pair of a distributed tracked table';

-- Rebuilds the filter shard of one impressions shard on this node from its rows: one user
-- (its text form, `user_key`) or all. Idempotent: it deletes what it rebuilds. Returns the
-- users rebuilt.
CREATE OR REPLACE FUNCTION seen_bloom._citus_rebuild_shard(impressions_shard regclass, filter_shard regclass, user_key text) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    of_user text := 'true';
    of_user_key text := 'true';
    users_done bigint;
BEGIN
    t := seen_bloom._tracked(impressions_shard);
    -- The configuration comes from the shard's trigger, which its owner may have made: the
    -- statements below (its `where`, its types) run as that owner, for a caller who may.
    PERFORM seen_bloom._check_owner(impressions_shard);
    IF t.filter_table IS DISTINCT FROM filter_shard THEN
        RAISE EXCEPTION 'seen_bloom: % is not the filter shard of %', filter_shard, impressions_shard
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF user_key IS NOT NULL THEN
        of_user := format('n.%I OPERATOR(pg_catalog.=) %L::%s', t.user_column, user_key, t.user_type);
        of_user_key := format('n.user_key OPERATOR(pg_catalog.=) %L::%s', user_key, t.user_type);
    END IF;
    -- The users first, locked as the folds lock them, then their rows deleted and refolded.
    users_done := seen_bloom._as_owner(impressions_shard, format(
        'SELECT n FROM (SELECT seen_bloom._lock_users(%L, pg_catalog.array_agg(u)) AS l, pg_catalog.count(*) AS n
                        FROM (SELECT n.%I AS u FROM %s n WHERE n.%I IS NOT NULL AND %s
                              UNION SELECT n.user_key FROM %s n WHERE %s) s) x',
        filter_shard, t.user_column, impressions_shard, t.user_column, of_user, filter_shard, of_user_key))::bigint;
    PERFORM seen_bloom._as_owner(impressions_shard, format('DELETE FROM %s n WHERE %s', filter_shard, of_user_key));
    PERFORM seen_bloom._as_owner(impressions_shard, format('SELECT pg_catalog.count(*) FROM (%s) f', seen_bloom._fold_query(t, impressions_shard::text, of_user)));
    RETURN users_done;
END $$;
COMMENT ON FUNCTION seen_bloom._citus_rebuild_shard(regclass, regclass, text) IS 'Internal: rebuilds one filter shard (one user or all) from its impressions shard';

-- seen_bloom.activity (src/activity.rs): per tracked table, what the read path and the fold
-- did since the last reset. Counters are kept in shared memory when seen_bloom is in
-- shared_preload_libraries; otherwise the view is empty and a NOTICE says how to turn them on.

CREATE OR REPLACE FUNCTION seen_bloom._activity(counters int) RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'seen_bloom__activity' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom._activity(int) IS 'Internal: the activity counters of this database''s tracked tables, per table its OID and the first `counters` counters';

CREATE OR REPLACE FUNCTION seen_bloom.activity_reset(impressions regclass DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom_activity_reset' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom.activity_reset(regclass) IS 'Zeroes the seen_bloom.activity counters of a tracked table (of every table of this database when NULL)';
REVOKE ALL ON FUNCTION seen_bloom.activity_reset(regclass) FROM PUBLIC;

-- The table's OID is shown as regclass only while the table exists (a dropped table's
-- counters stay until the server restarts, but are not shown).
CREATE OR REPLACE VIEW seen_bloom.activity AS
SELECT a[k + 1]::oid::regclass AS impressions,
       a[k + 2] AS unseen_calls,
       a[k + 3] AS has_seen_calls,
       a[k + 4] AS candidates_in,
       a[k + 5] AS candidates_seen,
       a[k + 6] AS candidates_returned,
       CASE WHEN a[k + 4] > 0 THEN a[k + 5]::float8 / a[k + 4] END AS seen_share,
       a[k + 7] AS folds,
       a[k + 8] AS impressions_folded,
       a[k + 9] AS rows_skipped,
       a[k + 10] / 1000.0 AS fold_ms,
       a[k + 11] / 1000.0 AS read_ms,
       a[k + 12] AS impressions_capped,
       a[k + 13] AS capped_folds
FROM (SELECT seen_bloom._activity(12) AS a) s,
     generate_series(0, coalesce(cardinality(s.a), 0) - 1, 13) k
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = a[k + 1]::oid)
  -- Only the tables the reader has a right on (as seen_bloom.tracked shows them).
  AND pg_catalog.has_table_privilege(a[k + 1]::oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER');
COMMENT ON VIEW seen_bloom.activity IS
    'Per tracked table since the last seen_bloom.activity_reset: unseen/has_seen calls, candidates in, seen (removed), returned and the seen share; statement folds, impressions folded, rows skipped (NULL user or item, outside the window); time folding and reading; impressions the per-user cap (seen_bloom.set_user_cap) kept out of the filter, and the user-generation folds that refused any (needs seen_bloom in shared_preload_libraries)';
GRANT SELECT ON seen_bloom.activity TO PUBLIC;

-- End of the generated part.

-- A change of the per-user cap makes every backend read the configuration again, as a
-- change of layout does.
DROP TRIGGER seen_bloom_layout ON seen_bloom.tracked;
CREATE TRIGGER seen_bloom_layout AFTER UPDATE ON seen_bloom.tracked
    FOR EACH ROW WHEN ((OLD.layout, OLD.user_cap) IS DISTINCT FROM (NEW.layout, NEW.user_cap))
    EXECUTE FUNCTION seen_bloom._layout_changed();
ALTER TABLE seen_bloom.tracked ENABLE ALWAYS TRIGGER seen_bloom_layout;

-- Before 0.5.0 the docs had owners that track granted INSERT, DELETE on seen_bloom.tracked:
-- only its owner writes it now (seen_bloom._write_tracked), and PUBLIC reads it. Every other
-- grant goes, SELECT too (PUBLIC has it), so the ACL is the one a fresh install has: inside an
-- extension script the ACL is also written to pg_init_privs, and on PostgreSQL 17+ a role named
-- there could not be dropped without DROP OWNED.
DO $$
DECLARE
    grantee pg_catalog.oid;
BEGIN
    FOR grantee IN SELECT DISTINCT a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
                   WHERE c.oid OPERATOR(pg_catalog.=) 'seen_bloom.tracked'::pg_catalog.regclass
                     AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
                     AND NOT (a.grantee OPERATOR(pg_catalog.=) 0 AND a.privilege_type OPERATOR(pg_catalog.=) 'SELECT') LOOP
        IF grantee OPERATOR(pg_catalog.=) 0 THEN
            REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON seen_bloom.tracked FROM PUBLIC;
        ELSE
            EXECUTE pg_catalog.format('REVOKE ALL ON seen_bloom.tracked FROM %I', pg_catalog.pg_get_userbyid(grantee));
        END IF;
    END LOOP;
END $$;

-- Filter tables and generated functions that a superuser made for another role's table (its
-- track) go to the table's owner, whose rights the folds use since 0.5.0. Only a filter table
-- that track made (a superuser's, in the table's schema, named <table>_seen): a row written by
-- a role granted DML on seen_bloom.tracked (as the docs advised before 0.5.0) may name any
-- table, and is left for health() to name. The generated functions keep their bodies:
-- seen_bloom.repair_triggers(impressions) remakes them.
DO $$
DECLARE
    t seen_bloom.tracked;
    expected pg_catalog.text;
BEGIN
    FOR t IN SELECT x.* FROM seen_bloom.tracked x
             JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) x.impressions
             JOIN pg_catalog.pg_class f ON f.oid OPERATOR(pg_catalog.=) x.filter_table
             JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) f.relowner
             WHERE f.relnamespace OPERATOR(pg_catalog.=) c.relnamespace AND r.rolsuper
               AND f.relowner OPERATOR(pg_catalog.<>) c.relowner LOOP
        SELECT seen_bloom._cut_to_bytes(c.relname, 58) INTO expected FROM pg_catalog.pg_class c
        WHERE c.oid OPERATOR(pg_catalog.=) t.impressions;
        IF (SELECT f.relname FROM pg_catalog.pg_class f WHERE f.oid OPERATOR(pg_catalog.=) t.filter_table)
           OPERATOR(pg_catalog.=) (expected OPERATOR(pg_catalog.||) '_seen') THEN
            PERFORM seen_bloom._follow_owner(t);
        END IF;
    END LOOP;
END $$;

-- Filter tables go with the extension since 0.5.0 (DROP EXTENSION ... CASCADE left them, and
-- the triggers of tables tracked with a where predicate, which then failed every INSERT).
SELECT seen_bloom._link_extension(x.filter_table) FROM seen_bloom.tracked x
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) x.filter_table);

-- The guard of the settings (the generated part above made its function; 0.5.0 adds it).
CREATE TRIGGER seen_bloom_settings BEFORE UPDATE ON seen_bloom.tracked
    FOR EACH ROW WHEN ((OLD.impressions, OLD.filter_table, OLD.user_type, OLD."window", OLD.generations,
                        OLD.generation_seconds, OLD.capacity, OLD.error_rate, OLD.error_rate_per_generation)
                       IS DISTINCT FROM
                       (NEW.impressions, NEW.filter_table, NEW.user_type, NEW."window", NEW.generations,
                        NEW.generation_seconds, NEW.capacity, NEW.error_rate, NEW.error_rate_per_generation))
    EXECUTE FUNCTION seen_bloom._settings_frozen();

-- seen_bloom 0.1.0 -> 0.2.0 (ALTER EXTENSION seen_bloom UPDATE).
\echo Use "ALTER EXTENSION seen_bloom UPDATE TO '0.2.0'" to load this file. \quit
--
-- Every change to the SQL objects (sql/seen_bloom.sql, sql/tracking.sql) made after 0.1.0
-- must be repeated here, so that an updated database ends with the same objects as a fresh
-- CREATE EXTENSION at 0.2.0; tests/integration/upgrade.sh compares the two catalogues and fails
-- when they differ. Stored values need nothing: the byte format is still version 1
-- (docs/FORMAT.md), and filter tables keep their layout.
--
-- Changes since 0.1.0:
-- - seen_bloom._fold_trigger(), the C trigger of tables tracked without a where predicate
--   (src/fold_trigger.rs), and track() using it. Tables tracked before the update keep their
--   generated SECURITY DEFINER fold function, which still works (untrack drops it); untrack
--   and track again to switch one to the C trigger.
-- - Search-path hardening (docs/SECURITY.md): generation_of, _fold_query, filter, expire and
--   both rebuild procedures qualify every function, operator and type; rebuild(regclass,
--   anyelement) pins its search_path, rebuild(regclass) pins it in each transaction.
-- - The fold skips impressions whose time is +infinity or whose generation would pass int4.
-- - The definitions below are the whole current ones, copied from sql/tracking.sql.

CREATE FUNCTION seen_bloom._fold_trigger() RETURNS trigger
    AS 'MODULE_PATHNAME', 'tracked_fold_trigger' LANGUAGE C;
COMMENT ON FUNCTION seen_bloom._fold_trigger() IS
    'Internal: the trigger of a table tracked without a where predicate; folds each statement''s new rows as the filter table''s owner';

CREATE OR REPLACE FUNCTION seen_bloom.generation_of(t timestamptz, generation_seconds bigint) RETURNS int
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$ SELECT pg_catalog.floor(pg_catalog.date_part('epoch', t) OPERATOR(pg_catalog./) generation_seconds::pg_catalog.float8)::pg_catalog.int4 $$;
COMMENT ON FUNCTION seen_bloom.generation_of(timestamptz, bigint) IS 'The generation (time bucket) a moment belongs to: whole generation_seconds since the Unix epoch';

CREATE OR REPLACE FUNCTION seen_bloom._fold_query(t seen_bloom.tracked, source text, extra_condition text DEFAULT 'true')
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    at_time text := CASE WHEN t.time_column IS NULL THEN 'pg_catalog.now()' ELSE format('n.%I', t.time_column) END;
BEGIN
    RETURN format(
        'SELECT seen_bloom._fold(%L::pg_catalog.regclass, %s::pg_catalog.float8, pg_catalog.array_agg(u), pg_catalog.array_agg(gen), pg_catalog.array_agg(h))
         FROM (SELECT n.%I AS u, seen_bloom.generation_of(%s, %s::pg_catalog.int8) AS gen, seen_bloom.item_hash(n.%I) AS h
               FROM %s n
               WHERE n.%I IS NOT NULL AND n.%I IS NOT NULL
                 AND %s OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %L::pg_catalog.interval)
                 AND (pg_catalog.date_part(''epoch'', %s) OPERATOR(pg_catalog./) %s::pg_catalog.float8) OPERATOR(pg_catalog.<) 2147483648::pg_catalog.float8
                 AND (%s) AND (%s)) s
         HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0',
        t.filter_table, t.error_rate_per_generation, t.user_column, at_time, t.generation_seconds,
        t.item_column, source, t.user_column, t.item_column, at_time, t."window",
        at_time, t.generation_seconds, coalesce(t."where", 'true'), extra_condition);
END $$;
COMMENT ON FUNCTION seen_bloom._fold_query(seen_bloom.tracked, text, text) IS 'Internal: the statement that folds impressions of a tracked table from a source relation';

CREATE OR REPLACE FUNCTION seen_bloom.track(impressions regclass, user_column name, item_column name,
                                 time_column name DEFAULT NULL, "window" interval DEFAULT '30 days',
                                 capacity bigint DEFAULT 100000, error_rate float8 DEFAULT 0.01,
                                 "where" text DEFAULT NULL)
RETURNS regclass LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $track$
DECLARE
    generations constant int := 5;
    rel record;
    user_type regtype;
    item_type regtype;
    time_type regtype;
    filter_name text;
    filter_table text;
    fold_function text;
    truncate_function text;
    function_base text;
    t seen_bloom.tracked;
BEGIN
    IF impressions IS NULL OR user_column IS NULL OR item_column IS NULL THEN
        RAISE EXCEPTION 'seen_bloom.track: impressions, user_column and item_column must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM seen_bloom.tracked x WHERE x.impressions = track.impressions) THEN
        RAISE EXCEPTION 'table % is already tracked by seen_bloom', impressions
            USING ERRCODE = 'duplicate_object', HINT = 'Call seen_bloom.untrack first to track it again.';
    END IF;
    SELECT c.relname, n.nspname, c.relkind INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = impressions;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', impressions USING ERRCODE = 'wrong_object_type';
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
    IF user_type NOT IN ('bigint'::regtype, 'text'::regtype, 'uuid'::regtype) THEN
        RAISE EXCEPTION 'user column "%" is %, but must be bigint, text or uuid', user_column, user_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF item_type NOT IN ('bigint'::regtype, 'integer'::regtype, 'text'::regtype, 'uuid'::regtype) THEN
        RAISE EXCEPTION 'item column "%" is %, but must be bigint, integer, text or uuid', item_column, item_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF time_column IS NOT NULL THEN
        SELECT a.atttypid::regtype INTO time_type FROM pg_attribute a
        WHERE a.attrelid = impressions AND a.attname = time_column AND a.attnum > 0 AND NOT a.attisdropped;
        IF time_type IS NULL THEN
            RAISE EXCEPTION 'column "%" of % does not exist', time_column, impressions USING ERRCODE = 'undefined_column';
        END IF;
        IF time_type <> 'timestamptz'::regtype THEN
            RAISE EXCEPTION 'time column "%" is %, but must be timestamptz', time_column, time_type
                USING ERRCODE = 'datatype_mismatch';
        END IF;
    END IF;
    IF "window" IS NULL OR "window" <= interval '0' THEN
        RAISE EXCEPTION 'window must be a positive interval, got %', "window" USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF capacity IS NULL OR capacity < 1 OR capacity > 1000000000 THEN
        RAISE EXCEPTION 'capacity must be between 1 and 1000000000, got %', capacity USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF error_rate IS NULL OR NOT (error_rate > 0 AND error_rate < 1) THEN
        RAISE EXCEPTION 'error_rate must be greater than 0 and less than 1, got %', error_rate
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF "where" IS NOT NULL THEN
        PERFORM seen_bloom._check_predicate("where");
        -- Type-check it against the table's columns (it runs over new rows as n).
        EXECUTE format('SELECT 1 FROM %s n WHERE (%s) LIMIT 0', impressions, "where");
    END IF;

    -- Names are cut by bytes (PostgreSQL truncates identifiers to 63 bytes, not characters).
    filter_name := rel.relname;
    WHILE octet_length(filter_name) > 58 LOOP
        filter_name := left(filter_name, -1);
    END LOOP;
    filter_name := filter_name || '_seen';
    -- The trigger functions are <filter>_fold and <filter>_truncate; where those would pass
    -- 63 bytes (and be cut to the same name), a shortened name and a hash of the whole.
    function_base := filter_name;
    IF octet_length(filter_name || '_truncate') > 63 THEN
        WHILE octet_length(function_base) > 63 - 18 LOOP
            function_base := left(function_base, -1);
        END LOOP;
        function_base := function_base || '_' || left(md5(filter_name), 8);
    END IF;
    filter_table := format('%I.%I', rel.nspname, filter_name);
    IF to_regclass(filter_table) IS NOT NULL THEN
        RAISE EXCEPTION 'relation % already exists', filter_table USING ERRCODE = 'duplicate_table';
    END IF;
    -- Rows stay under 2 KB (at most 48 blocks of 32 bytes), inline and HOT-updatable.
    EXECUTE format('CREATE TABLE %s (user_key %s NOT NULL, generation int4 NOT NULL, layer int2 NOT NULL,
                    segment int4 NOT NULL, bits bytea NOT NULL,
                    PRIMARY KEY (user_key, generation, layer, segment)) WITH (fillfactor = 90)',
                   filter_table, user_type);
    EXECUTE format('ALTER TABLE %s ALTER COLUMN bits SET STORAGE MAIN', filter_table);
    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', filter_table);
    EXECUTE format('COMMENT ON TABLE %s IS %L', filter_table,
                   format('seen_bloom filter rows of %s (maintained by triggers; read with seen_bloom.unseen)', impressions));

    INSERT INTO seen_bloom.tracked (impressions, filter_table, user_column, item_column, time_column, user_type,
                                    item_type, "window", generations, generation_seconds, capacity, error_rate,
                                    error_rate_per_generation, "where")
    VALUES (impressions, filter_table::regclass, user_column, item_column, time_column, user_type, item_type,
            "window", generations, ceil(extract(epoch FROM "window") / generations)::bigint, capacity, error_rate,
            error_rate / (generations + 1), "where")
    RETURNING * INTO t;

    -- The triggers fold as the owner of the filter table (the caller), so a role that may
    -- only INSERT into the impressions table still has its impressions folded in. Without a
    -- predicate that is seen_bloom._fold_trigger (C, reads the transition table itself);
    -- with one, a generated SECURITY DEFINER function whose query applies the predicate.
    IF t."where" IS NULL THEN
        fold_function := 'seen_bloom._fold_trigger';
    ELSE
        fold_function := format('%I.%I', rel.nspname, function_base || '_fold');
        EXECUTE format('CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                        SET search_path = pg_catalog, pg_temp AS %L',
                       fold_function, format('BEGIN PERFORM * FROM (%s) f; RETURN NULL; END', seen_bloom._fold_query(t, 'new_rows')));
        EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', fold_function);
        EXECUTE format('COMMENT ON FUNCTION %s() IS %L', fold_function, format('seen_bloom: folds new impressions of %s into %s', impressions, filter_table));
    END IF;
    truncate_function := format('%I.%I', rel.nspname, function_base || '_truncate');
    EXECUTE format('CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = pg_catalog, pg_temp AS %L',
                   truncate_function, format('BEGIN TRUNCATE %s; RETURN NULL; END', filter_table));
    EXECUTE format('REVOKE ALL ON FUNCTION %s() FROM PUBLIC', truncate_function);
    EXECUTE format('COMMENT ON FUNCTION %s() IS %L', truncate_function, format('seen_bloom: empties %s when %s is truncated', filter_table, impressions));
    EXECUTE format('CREATE TRIGGER seen_bloom_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows
                    FOR EACH STATEMENT EXECUTE FUNCTION %s()', impressions, fold_function);
    EXECUTE format('CREATE TRIGGER seen_bloom_update AFTER UPDATE ON %s REFERENCING NEW TABLE AS new_rows
                    FOR EACH STATEMENT EXECUTE FUNCTION %s()', impressions, fold_function);
    EXECUTE format('CREATE TRIGGER seen_bloom_truncate AFTER TRUNCATE ON %s
                    FOR EACH STATEMENT EXECUTE FUNCTION %s()', impressions, truncate_function);

    -- Backfill: the impressions already in the window, in 64 slices of users.
    EXECUTE format('SELECT count(*) FROM (%s) f',
                   replace(seen_bloom._fold_query(t, impressions::text), 'HAVING', 'GROUP BY (seen_bloom.item_hash(u) OPERATOR(pg_catalog.&) 63) HAVING'));
    RETURN filter_table::regclass;
END $track$;
COMMENT ON FUNCTION seen_bloom.track(regclass, name, name, name, interval, bigint, float8, text) IS
    'Tracks an impressions table: creates <impressions>_seen, the triggers that fold each inserted batch into it in the same transaction, and backfills the window; returns the filter table';

CREATE OR REPLACE FUNCTION seen_bloom.untrack(impressions regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    schema_name text;
    filter_name text;
    functions regprocedure[];
    f regprocedure;
BEGIN
    t := seen_bloom._tracked(impressions);
    SELECT n.nspname, c.relname INTO schema_name, filter_name
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t.filter_table;
    -- The generated trigger functions, found through the triggers (their names may carry a
    -- hash, see track); the extension's own C trigger stays.
    SELECT array_agg(DISTINCT g.tgfoid::regprocedure) INTO functions
    FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
    WHERE g.tgrelid = impressions AND NOT g.tgisinternal
      AND g.tgname IN ('seen_bloom_insert', 'seen_bloom_update', 'seen_bloom_truncate')
      AND p.pronamespace <> 'seen_bloom'::regnamespace;
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_insert ON %s', impressions);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_update ON %s', impressions);
    EXECUTE format('DROP TRIGGER IF EXISTS seen_bloom_truncate ON %s', impressions);
    FOREACH f IN ARRAY coalesce(functions, '{}') LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %s', f);
    END LOOP;
    -- By name too, in case the triggers were dropped by hand (names that fit 63 bytes only).
    IF octet_length(filter_name || '_truncate') <= 63 THEN
        EXECUTE format('DROP FUNCTION IF EXISTS %I.%I()', schema_name, filter_name || '_fold');
        EXECUTE format('DROP FUNCTION IF EXISTS %I.%I()', schema_name, filter_name || '_truncate');
    END IF;
    EXECUTE format('DROP TABLE %s', t.filter_table);
    DELETE FROM seen_bloom.tracked x WHERE x.impressions = untrack.impressions;
END $$;
COMMENT ON FUNCTION seen_bloom.untrack(regclass) IS 'Stops tracking: drops the triggers, the filter table and the configuration row';

CREATE OR REPLACE FUNCTION seen_bloom.filter(impressions regclass, "user" anyelement) RETURNS bloom
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
    result @extschema@.bloom;
BEGIN
    t := seen_bloom._tracked(impressions);
    -- Every argument has the exact type of an extension function (integer items as bigint),
    -- so an overload someone adds in the extension's schema is never a better match.
    EXECUTE format('SELECT @extschema@.bloom_agg(n.%I::%s, %s::pg_catalog.int8, %s::pg_catalog.float8) FROM %s n
                    WHERE n.%I OPERATOR(pg_catalog.=) $1 AND n.%I IS NOT NULL AND (%s) AND (%s)',
                   t.item_column,
                   CASE t.item_type WHEN 'integer'::regtype THEN 'pg_catalog.int8' WHEN 'bigint'::regtype THEN 'pg_catalog.int8'
                                    WHEN 'text'::regtype THEN 'pg_catalog.text' ELSE 'pg_catalog.uuid' END,
                   t.capacity, t.error_rate, impressions, t.user_column, t.item_column,
                   CASE WHEN t.time_column IS NULL THEN 'true'
                        ELSE format('n.%I OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %L::pg_catalog.interval)',
                                    t.time_column, t."window") END,
                   coalesce(t."where", 'true'))
    INTO result USING "user";
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
    END IF;
    FOR t IN SELECT * FROM seen_bloom.tracked x WHERE expire.impressions IS NULL OR x.impressions = expire.impressions LOOP
        EXECUTE format('DELETE FROM %s WHERE generation OPERATOR(pg_catalog.<) seen_bloom.generation_of(pg_catalog.now() OPERATOR(pg_catalog.-) %L::pg_catalog.interval, %s::pg_catalog.int8)',
                       t.filter_table, t."window", t.generation_seconds);
        GET DIAGNOSTICS deleted = ROW_COUNT;
        total := total + deleted;
    END LOOP;
    RETURN total;
END $$;
COMMENT ON FUNCTION seen_bloom.expire(regclass) IS
    'Deletes filter rows of generations that left the window (all tracked tables when NULL) and returns how many; reads ignore them already';

CREATE OR REPLACE PROCEDURE seen_bloom.rebuild(impressions regclass, "user" anyelement)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    t := seen_bloom._tracked(impressions);
    PERFORM seen_bloom._lock_users(t.filter_table, ARRAY["user"]);
    EXECUTE pg_catalog.format('DELETE FROM %s WHERE user_key OPERATOR(pg_catalog.=) $1', t.filter_table) USING "user";
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM (%s) f',
                   seen_bloom._fold_query(t, impressions::pg_catalog.text,
                                          pg_catalog.format('n.%I OPERATOR(pg_catalog.=) %L', t.user_column, "user")));
END $$;
COMMENT ON PROCEDURE seen_bloom.rebuild(regclass, anyelement) IS
    'Repairs one user''s filter from the impression rows in the window (after DELETEs of impressions, or any doubt)';

CREATE OR REPLACE PROCEDURE seen_bloom.rebuild(impressions regclass)
LANGUAGE plpgsql AS $$
DECLARE
    batch_users constant int := 1000;
    t seen_bloom.tracked;
    total bigint;
    done bigint := 0;
    users_sql text;
    batch record;
BEGIN
    -- A procedure that commits cannot have a SET clause: the search_path is pinned for each
    -- transaction instead (SET LOCAL ends with it), and every name is qualified as well.
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    t := seen_bloom._tracked(impressions);
    -- Users with impressions and users with filter rows: both are rebuilt (the latter to nothing).
    users_sql := pg_catalog.format('SELECT %I AS u FROM %s WHERE %I IS NOT NULL UNION SELECT user_key FROM %s',
                                   t.user_column, impressions, t.user_column, t.filter_table);
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM (%s) s', users_sql) INTO total;
    RAISE NOTICE 'seen_bloom.rebuild(%): % users', impressions, total;
    FOR batch IN EXECUTE pg_catalog.format(
        'SELECT pg_catalog.array_agg(u ORDER BY u) AS users
         FROM (SELECT u, (pg_catalog.row_number() OVER (ORDER BY u) OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog./) %s::pg_catalog.int8 AS b
               FROM (%s) s) s
         GROUP BY b ORDER BY b', batch_users, users_sql)
    LOOP
        PERFORM seen_bloom._lock_users(t.filter_table, batch.users);
        EXECUTE pg_catalog.format('DELETE FROM %s WHERE user_key OPERATOR(pg_catalog.=) ANY ($1)', t.filter_table) USING batch.users;
        EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM (%s) f',
                       seen_bloom._fold_query(t, impressions::pg_catalog.text,
                                              pg_catalog.format('n.%I OPERATOR(pg_catalog.=) ANY (%L)', t.user_column, batch.users)));
        done := done OPERATOR(pg_catalog.+) pg_catalog.cardinality(batch.users)::pg_catalog.int8;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        RAISE NOTICE 'seen_bloom.rebuild(%): % / % users', impressions, done, total;
    END LOOP;
END $$;
COMMENT ON PROCEDURE seen_bloom.rebuild(regclass) IS
    'Repairs every user''s filter from the impression rows in the window, committing every 1,000 users with a NOTICE of progress (users done / total); CALL it outside a transaction block';

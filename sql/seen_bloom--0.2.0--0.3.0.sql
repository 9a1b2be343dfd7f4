-- seen_bloom 0.2.0 -> 0.3.0 (ALTER EXTENSION seen_bloom UPDATE).
\echo Use "ALTER EXTENSION seen_bloom UPDATE TO '0.3.0'" to load this file. \quit
--
-- Every change to the SQL objects (sql/seen_bloom.sql, sql/tracking.sql) made after 0.2.0
-- must be repeated here, so that an updated database ends with the same objects as a fresh
-- CREATE EXTENSION at 0.3.0; tests/integration/upgrade.sh compares the two catalogues and fails
-- when they differ. Stored bloom values need nothing: the byte format is still version 1.
--
-- Changes since 0.2.0:
-- - Tracking layout 2 (docs/FORMAT.md, "Tracking rows"): a generation's first layer fills one
--   filter row (720 items at the default budget, against 144), so a user with a few thousand
--   impressions per window has one layer per generation. seen_bloom.tracked records each
--   table's layout; tables tracked before this update keep layout 1 and their rows (untrack
--   and track again to move one to layout 2). The fold takes the layout as an argument; the
--   form without it stays for the fold functions that tables tracked with a where predicate
--   generated before, and folds layout 1.
-- - _layer_blocks takes the layout; stats passes it.
-- - The definitions below are the whole current ones, copied from sql/tracking.sql.

ALTER TABLE seen_bloom.tracked ADD COLUMN layout int;
UPDATE seen_bloom.tracked SET layout = 1;
ALTER TABLE seen_bloom.tracked ALTER COLUMN layout SET NOT NULL;
COMMENT ON COLUMN seen_bloom.tracked.layout IS 'How the filter rows size a generation''s first layer: 2 (one full row) for tables tracked since 0.3.0, 1 (so that the second layer fits one row) for tables tracked before';

CREATE FUNCTION seen_bloom._fold(filter_table regclass, error_rate_per_generation float8, layout int,
                                 users anyarray, generations int4[], hashes int8[]) RETURNS void
    AS 'MODULE_PATHNAME', 'tracked_fold' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION seen_bloom._fold(regclass, float8, int, anyarray, int4[], int8[]) IS
    'Internal: folds a batch of (user, generation, item hash) into a filter table of the given layout, with the caller''s privileges on it';
COMMENT ON FUNCTION seen_bloom._fold(regclass, float8, anyarray, int4[], int8[]) IS
    'Internal: folds into a filter table of layout 1 (called by the fold functions of tables tracked before 0.3.0 with a where predicate)';

DROP FUNCTION seen_bloom._layer_blocks(float8, int);
CREATE FUNCTION seen_bloom._layer_blocks(error_rate_per_generation float8, layer int, layout int) RETURNS bigint
    AS 'MODULE_PATHNAME', 'layer_blocks' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION seen_bloom._layer_blocks(float8, int, int) IS 'Internal: blocks in a generation layer of a tracked table of the given layout';

CREATE OR REPLACE FUNCTION seen_bloom._fold_query(t seen_bloom.tracked, source text, extra_condition text DEFAULT 'true')
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    at_time text := CASE WHEN t.time_column IS NULL THEN 'pg_catalog.now()' ELSE format('n.%I', t.time_column) END;
BEGIN
    RETURN format(
        'SELECT seen_bloom._fold(%L::pg_catalog.regclass, %s::pg_catalog.float8, %s::pg_catalog.int4, pg_catalog.array_agg(u), pg_catalog.array_agg(gen), pg_catalog.array_agg(h))
         FROM (SELECT n.%I AS u, seen_bloom.generation_of(%s, %s::pg_catalog.int8) AS gen, seen_bloom.item_hash(n.%I) AS h
               FROM %s n
               WHERE n.%I IS NOT NULL AND n.%I IS NOT NULL
                 AND %s OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) %L::pg_catalog.interval)
                 AND (pg_catalog.date_part(''epoch'', %s) OPERATOR(pg_catalog./) %s::pg_catalog.float8) OPERATOR(pg_catalog.<) 2147483648::pg_catalog.float8
                 AND (%s) AND (%s)) s
         HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 0',
        t.filter_table, t.error_rate_per_generation, t.layout, t.user_column, at_time, t.generation_seconds,
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
                                    error_rate_per_generation, "where", layout)
    VALUES (impressions, filter_table::regclass, user_column, item_column, time_column, user_type, item_type,
            "window", generations, ceil(extract(epoch FROM "window") / generations)::bigint, capacity, error_rate,
            error_rate / (generations + 1), "where", 2)
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

CREATE OR REPLACE FUNCTION seen_bloom.stats(impressions regclass)
RETURNS TABLE (users bigint, filter_rows bigint, total_bytes bigint, bytes_per_user_mean float8,
               bytes_per_user_max bigint, generations bigint, saturated_generations bigint,
               estimated_fpr_mean float8, estimated_fpr_max float8)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    t := seen_bloom._tracked(impressions);
    RETURN QUERY EXECUTE format(
        'WITH live AS (
             SELECT * FROM %1$s WHERE generation >= seen_bloom.generation_of(pg_catalog.now() - %2$L::interval, %3$s)),
         per_layer AS (
             SELECT user_key, generation, layer,
                    CASE WHEN layer < 0 THEN 0
                         ELSE sum(seen_bloom._segment_fpr(bits) * (length(bits) / 32))
                              / seen_bloom._layer_blocks(%4$s, layer, %6$s) END AS fpr,
                    max(CASE WHEN layer < 0 THEN 0 ELSE seen_bloom._segment_fill(bits) END) AS max_fill
             FROM live GROUP BY 1, 2, 3),
         per_user AS (
             SELECT user_key, 1 - exp(sum(ln(greatest(1 - fpr, 1e-300)))) AS fpr,
                    count(DISTINCT generation) AS generations,
                    count(DISTINCT generation) FILTER (WHERE max_fill > 0.8) AS saturated
             FROM per_layer GROUP BY 1),
         bytes AS (SELECT user_key, count(*) AS row_count, sum(pg_column_size(l.*)) AS row_bytes FROM %1$s l GROUP BY 1)
         SELECT count(*)::bigint, coalesce(sum(b.row_count), 0)::bigint,
                pg_total_relation_size(%5$L)::bigint,
                pg_total_relation_size(%5$L)::float8 / greatest(count(*), 1),
                coalesce(max(b.row_bytes), 0)::bigint,
                coalesce(sum(p.generations), 0)::bigint, coalesce(sum(p.saturated), 0)::bigint,
                coalesce(avg(p.fpr), 0)::float8, coalesce(max(p.fpr), 0)::float8
         FROM bytes b LEFT JOIN per_user p USING (user_key)',
        t.filter_table, t."window", t.generation_seconds, t.error_rate_per_generation, t.filter_table, t.layout);
END $$;
COMMENT ON FUNCTION seen_bloom.stats(regclass) IS
    'Health of a tracked table: users, filter rows, total bytes (table and indexes), bytes per user (mean of the total; max of row bytes), live generations, saturated generations (a row over 80% full), estimated false-positive rate of users'' windows (mean, max)';

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
CREATE FUNCTION seen_bloom._citus() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_extension e WHERE e.extname = 'citus')
$$;
COMMENT ON FUNCTION seen_bloom._citus() IS 'Internal: whether Citus is installed in this database';

-- The Citus table of `rel` on this node: (rel, NULL) for a distributed table, (its
-- distributed table, the shard id) for a shard, NULLs otherwise. A shard is named
-- <table>_<shard id> (Citus keeps the suffix when it shortens a long name); the name is
-- read from the syscache through regclass, as Citus hides shards from SQL over pg_class.
CREATE FUNCTION seen_bloom._citus_table_of(rel regclass, OUT distributed regclass, OUT shard bigint)
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
CREATE FUNCTION seen_bloom._citus_shard_relation(distributed regclass, shard bigint) RETURNS regclass
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
CREATE FUNCTION seen_bloom._citus_local_shard(distributed regclass, shard bigint) RETURNS regclass
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
CREATE FUNCTION seen_bloom._citus_allow_triggers(rel regclass) RETURNS boolean
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
CREATE FUNCTION seen_bloom._citus_trigger_config(t seen_bloom.tracked) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT (to_jsonb(t) - 'impressions' - 'tracked_at')::text
$$;
COMMENT ON FUNCTION seen_bloom._citus_trigger_config(seen_bloom.tracked) IS 'Internal: the configuration argument of a distributed tracked table''s insert trigger';

-- The configuration of `rel` on a node without a seen_bloom.tracked row for it (a Citus
-- worker), NULL when it has none: for a shard of a distributed tracked table, with the
-- co-located filter shard on this node (55000 when it is elsewhere); for the distributed
-- table's relation on this node, with the distributed filter table (reads then go to the
-- user's shard, see src/citus.rs).
CREATE FUNCTION seen_bloom._citus_config(rel regclass) RETURNS seen_bloom.tracked
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
CREATE FUNCTION seen_bloom._citus_filter_registered(filter regclass, error_rate_per_generation float8) RETURNS boolean
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
CREATE FUNCTION seen_bloom._citus_check_trackable(impressions regclass, user_column name, "where" text) RETURNS void
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
CREATE FUNCTION seen_bloom._citus_read_functions(impressions regclass, user_type regtype,
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
CREATE FUNCTION seen_bloom._citus_distribute(t seen_bloom.tracked) RETURNS void
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
CREATE FUNCTION seen_bloom._citus_drop_read_functions(t seen_bloom.tracked) RETURNS void
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
CREATE FUNCTION seen_bloom._citus_check_renamed(t seen_bloom.tracked) RETURNS void
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
CREATE FUNCTION seen_bloom._citus_on_placements(t seen_bloom.tracked, command text) RETURNS bigint
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
CREATE FUNCTION seen_bloom._citus_rebuild_shard(impressions_shard regclass, filter_shard regclass, user_key text) RETURNS bigint
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

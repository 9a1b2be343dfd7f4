#!/usr/bin/env bash
# Upgrade paths: for each released version (0.1.0 to 0.4.0, sql/archive/), install it, store
# filters (bloom values of every representation and item type in a table, and two tracked
# impressions tables: bigint users with a `where` predicate, text users), ALTER EXTENSION
# seen_bloom UPDATE, then:
#   - \dx shows the current version,
#   - every stored filter answers exactly as before (bytes, contains over fixed candidate sets,
#     bloom_unseen, info, cardinality; tracked users' seen_bloom.unseen over a candidate set),
#   - tracking keeps working (new impressions are seen, fresh items are not), health() reports
#     the missing replica triggers until repair_triggers() adds them, the tables keep their
#     tracking layout (1 before 0.3.0), a rebuild works, untrack + track moves a table
#     to layout 3 and relayout the other, both with every impression seen,
#   - the updated extension's objects are those of a fresh CREATE EXTENSION (so a change to the
#     SQL without its line in sql/seen_bloom--A--B.sql fails here).
# Usage: upgrade.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_upgrade
fresh_db=seen_bloom_upgrade_fresh
make_work_dir

current_version="$(psql_at "$PORT" postgres -At -c "SELECT default_version FROM pg_available_extensions WHERE name = 'seen_bloom'")"
echo "    versions available: $(psql_at "$PORT" postgres -At -c "SELECT string_agg(version, ', ' ORDER BY version) FROM pg_available_extension_versions WHERE name = 'seen_bloom'"); default $current_version"

update_from() {
old_version="$1"
# Tables tracked by 0.1.0 and 0.2.0 are in layout 1; 0.3.0 tracks in layout 2.
old_layout=1
[ "$old_version" = 0.3.0 ] && old_layout=2
[ "$old_version" = 0.4.0 ] && old_layout=3
echo "  from $old_version:"
[ "$current_version" != "$old_version" ] || fail "the default version is still $old_version"
path="$(psql_at "$PORT" postgres -At -c "SELECT path FROM pg_extension_update_paths('seen_bloom') WHERE source = '$old_version' AND target = '$current_version'")"
[ -n "$path" ] || fail "no update path from $old_version to $current_version (is sql/archive/seen_bloom--$old_version.sql installed?)"
echo "    update path: $path"

recreate_database "$PORT" "$db" "$fresh_db"
psql_at "$PORT" "$db" -c "CREATE EXTENSION seen_bloom VERSION '$old_version'"
installed="$(psql_at "$PORT" "$db" -At -c "SELECT extversion FROM pg_extension WHERE extname = 'seen_bloom'")"
[ "$installed" = "$old_version" ] || fail "CREATE EXTENSION ... VERSION '$old_version' installed $installed"

# Filters stored by the old version.
psql_at "$PORT" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE TABLE filters (id int PRIMARY KEY, kind text NOT NULL, f bloom);
INSERT INTO filters VALUES
    (1, 'exact bigint', bloom_add(NULL::bloom, ARRAY[1, 2, 3, 10007]::bigint[])),
    (2, 'scaling, one layer', (SELECT bloom_agg(g::bigint) FROM generate_series(1, 5000) g)),
    (3, 'scaling, several layers', (SELECT bloom_agg(g::bigint, 1000, 0.01) FROM generate_series(1, 20000) g)),
    (4, 'fixed text', (SELECT bloom_add(bloom_empty(10000, 0.001, false), array_agg('k' || g)) FROM generate_series(1, 8000) g)),
    (5, 'uuid', (SELECT bloom_agg(md5(g::text)::uuid) FROM generate_series(1, 3000) g)),
    (6, 'bytea', (SELECT bloom_agg(convert_to('k' || g, 'UTF8')) FROM generate_series(1, 500) g)),
    (7, 'union', (SELECT bloom_agg(g::bigint) FROM generate_series(1, 3000) g) || (SELECT bloom_agg(g::bigint) FROM generate_series(2500, 6000) g)),
    (8, 'empty', bloom_empty(100, 0.05)),
    (9, 'null', NULL);
-- Made by this build's library, which writes format version 2: turned into the version 1 bytes
-- that releases before 0.4.0 wrote (the two differ in the version byte and the family bits).
UPDATE filters SET f = set_byte(set_byte(f::bytea, 4, 1), 7, get_byte(f::bytea, 7) & 1)::bloom WHERE f IS NOT NULL;

CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real NOT NULL);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at', "where" => 'watch_pct >= 0.5');
-- users 1..100 see from 5 to 500 posts (exact rows up to promoted layers), a few over days.
INSERT INTO impressions (user_id, post_id, seen_at, watch_pct)
SELECT u, (u * 7919 + k) % 100000, now() - ((k % 20) || ' days')::interval, CASE WHEN k % 5 = 0 THEN 0.1 ELSE 0.9 END
FROM generate_series(1, 100) u, generate_series(1, 5 * u) k;

CREATE TABLE text_impressions (user_name text, item text, seen_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON text_impressions (user_name);
SELECT seen_bloom.track('text_impressions', 'user_name', 'item', 'seen_at', "window" => '7 days');
INSERT INTO text_impressions (user_name, item)
SELECT 'user-' || u, 'item-' || (u * 31 + k) % 5000 FROM generate_series(1, 50) u, generate_series(1, 3 * u) k;
SQL
if [ "$old_version" = 0.4.0 ]; then
    # Compacted rows of version 1 (0.4.0's one split-block filter): the text users' answers
    # below are compared across the update, so the new library reads them alike.
    psql_at "$PORT" "$db" -q -c "SET client_min_messages = warning" -c "CALL seen_bloom.compact('text_impressions', 0)"
    v1_rows="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM text_impressions_seen WHERE layer = -2")"
    [ "$v1_rows" -ge 50 ] || fail "0.4.0's compact wrote $v1_rows compacted rows for 50 users"
fi

# Every answer the stored filters give, as a table (in each database state).
answers_sql() {
    cat <<SQL
SET client_min_messages = warning;
CREATE TABLE $1 AS
SELECT id, f::bytea AS bytes, bloom_info(f) AS info, bloom_cardinality(f) AS cardinality,
       bloom_contains(f, ARRAY(SELECT g::bigint FROM generate_series(1, 25000) g)) AS ints,
       bloom_contains(f, ARRAY(SELECT 'k' || g FROM generate_series(1, 10000) g)) AS texts,
       bloom_contains(f, ARRAY(SELECT md5(g::text)::uuid FROM generate_series(1, 4000) g)) AS uuids,
       bloom_unseen(f, ARRAY(SELECT g::bigint FROM generate_series(1, 25000) g)) AS unseen
FROM filters;
CREATE TABLE ${1}_tracked AS
SELECT u AS user_id,
       seen_bloom.unseen('impressions', u::bigint, ARRAY(SELECT g::bigint FROM generate_series(0, 99999) g)) AS unseen
FROM generate_series(0, 101) u;
CREATE TABLE ${1}_text AS
SELECT u, seen_bloom.unseen('text_impressions', 'user-' || u, ARRAY(SELECT 'item-' || g FROM generate_series(0, 4999) g)) AS unseen
FROM generate_series(0, 51) u;
SQL
}
answers_sql before | psql_at "$PORT" "$db" -o /dev/null

# Sanity of what is compared: the filters hold their items, and the tracked ones too.
sanity="$(psql_at "$PORT" "$db" -At <<'SQL'
SELECT (SELECT count(*) FROM before WHERE id NOT IN (8, 9) AND (true = ANY (ints) OR true = ANY (texts) OR true = ANY (uuids))),
       (SELECT count(*) FROM impressions WHERE watch_pct >= 0.5 AND NOT seen_bloom.has_seen('impressions', user_id, post_id)),
       (SELECT count(*) FROM text_impressions WHERE NOT seen_bloom.has_seen('text_impressions', user_name, item)),
       (SELECT count(DISTINCT info->>'representation') FROM before),
       (SELECT sum(100000 - cardinality(unseen)) FROM before_tracked)
SQL
)"
IFS='|' read -r nonempty missed_int missed_text representations seen_total <<<"$sanity"
echo "    stored by $old_version: 7 non-empty filters ($nonempty answer seen), $representations representations; tracked: $(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM impressions") + $(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM text_impressions") impressions, $seen_total candidates seen"
{ [ "$nonempty" -eq 7 ] && [ "$missed_int" -eq 0 ] && [ "$missed_text" -eq 0 ] && [ "$representations" -eq 2 ]; } ||
    fail "unexpected state before the update: $sanity"

# The model before 0.5.0: a superuser tracked another role's table, so the filter table and
# generated functions are the superuser's. The update gives them to the table's owner, whose
# rights the folds use since 0.5.0 (the inserts below would fail otherwise).
# And a row forged before the update by a role granted DML on seen_bloom.tracked (the docs
# advised that grant before 0.5.0), pairing its table with another role's: the update must
# neither give that table away nor leave the grant.
psql_at "$PORT" "$db" -q <<'SQL'
SET client_min_messages = warning;
DROP ROLE IF EXISTS sb_upgrade_owner;
CREATE ROLE sb_upgrade_owner;
ALTER TABLE text_impressions OWNER TO sb_upgrade_owner;
DROP ROLE IF EXISTS sb_upgrade_forger;
DROP ROLE IF EXISTS sb_upgrade_victim;
CREATE ROLE sb_upgrade_forger;
CREATE ROLE sb_upgrade_victim;
CREATE TABLE victim (user_key bigint, generation int, layer smallint, segment int, bits bytea);
ALTER TABLE victim OWNER TO sb_upgrade_victim;
CREATE TABLE forged (u bigint, i bigint);
ALTER TABLE forged OWNER TO sb_upgrade_forger;
GRANT SELECT, INSERT, DELETE ON seen_bloom.tracked TO sb_upgrade_forger;
SET ROLE sb_upgrade_forger;
INSERT INTO seen_bloom.tracked
SELECT (jsonb_populate_record(t, '{"impressions": "forged", "filter_table": "victim"}')).* FROM seen_bloom.tracked t
 WHERE t.impressions = 'text_impressions'::regclass;
RESET ROLE;
SQL
psql_at "$PORT" "$db" -c "ALTER EXTENSION seen_bloom UPDATE"
moved="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM seen_bloom.tracked t JOIN pg_class c ON c.oid = t.impressions
    JOIN pg_class f ON f.oid = t.filter_table WHERE f.relowner = c.relowner AND c.relowner = 'sb_upgrade_owner'::regrole")"
echo "    filter tables given to their table's owner by the update: $moved of 1"
[ "$moved" = 1 ] || fail "the update did not give text_impressions_seen to the owner of text_impressions"
forged="$(psql_at "$PORT" "$db" -At -c "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'victim'::regclass" \
    -c "SELECT has_table_privilege('sb_upgrade_forger', 'seen_bloom.tracked', 'INSERT, DELETE')")"
echo "    a forged row's table after the update: owned by $(printf '%s' "$forged" | head -1); the forger may still write seen_bloom.tracked: $(printf '%s' "$forged" | tail -1)"
[ "$forged" = "sb_upgrade_victim
f" ] || fail "the update gave a forged row's table away, or left the forger's grant: $forged"
psql_at "$PORT" "$db" -q -c "DELETE FROM seen_bloom.tracked WHERE impressions = 'forged'::regclass" -c "DROP TABLE forged, victim" \
    -c "DROP ROLE sb_upgrade_victim"
# No REVOKE first: the update took the whole grant, and on PostgreSQL 17+ also from
# pg_init_privs, so the role drops as it did before the grant.
psql_at "$PORT" "$db" -q -c "DROP ROLE sb_upgrade_forger" || fail "the update left a privilege of sb_upgrade_forger behind"
dx="$(psql_at "$PORT" "$db" -c '\dx seen_bloom')"
while IFS= read -r line; do echo "    $line"; done <<<"$dx"
echo "$dx" | grep -Eq "^ *seen_bloom *\| *${current_version//./\\.} *\|" || fail "\\dx does not show seen_bloom $current_version"

answers_sql after | psql_at "$PORT" "$db" -o /dev/null
diff="$(psql_at "$PORT" "$db" -At <<'SQL'
SELECT (SELECT count(*) FROM before b FULL JOIN after a USING (id)
        WHERE (b.bytes, b.info, b.cardinality, b.ints, b.texts, b.uuids, b.unseen)
              IS DISTINCT FROM (a.bytes, a.info, a.cardinality, a.ints, a.texts, a.uuids, a.unseen)),
       (SELECT count(*) FROM before_tracked b FULL JOIN after_tracked a USING (user_id) WHERE b.unseen IS DISTINCT FROM a.unseen),
       (SELECT count(*) FROM before_text b FULL JOIN after_text a USING (u) WHERE b.unseen IS DISTINCT FROM a.unseen),
       (SELECT count(*) FROM after), (SELECT count(*) FROM after_tracked), (SELECT count(*) FROM after_text)
SQL
)"
IFS='|' read -r d_filters d_tracked d_text n_filters n_tracked n_text <<<"$diff"
echo "    after the update: $d_filters of $n_filters stored filters, $d_tracked of $n_tracked bigint users, $d_text of $n_text text users answer differently"
{ [ "$d_filters" -eq 0 ] && [ "$d_tracked" -eq 0 ] && [ "$d_text" -eq 0 ]; } || fail "stored filters answer differently after the update"

# Tracking keeps working: new impressions (to existing and new users) are seen, fresh ones not.
after_insert="$(psql_at "$PORT" "$db" -At <<'SQL'
SET client_min_messages = warning;
INSERT INTO impressions (user_id, post_id, watch_pct) SELECT u, 200000 + u, 1 FROM generate_series(1, 120) u;
INSERT INTO text_impressions (user_name, item) SELECT 'user-' || u, 'new-' || u FROM generate_series(1, 60) u;
SELECT (SELECT count(*) FROM generate_series(1, 120) u WHERE NOT seen_bloom.has_seen('impressions', u::bigint, 200000 + u)),
       (SELECT count(*) FROM generate_series(1, 60) u WHERE NOT seen_bloom.has_seen('text_impressions', 'user-' || u, 'new-' || u)),
       (SELECT cardinality(seen_bloom.unseen('impressions', 50::bigint, ARRAY(SELECT g::bigint FROM generate_series(300000, 300999) g))));
SQL
)"
IFS='|' read -r new_missed text_missed fresh_unseen <<<"$after_insert"
echo "    new impressions after the update not seen: $new_missed of 120 (bigint), $text_missed of 60 (text); fresh candidates unseen: $fresh_unseen of 1000"
{ [ "$new_missed" -eq 0 ] && [ "$text_missed" -eq 0 ] && [ "$fresh_unseen" -ge 950 ]; } || fail "tracking after the update"

# compact after the update writes this build's filters over whatever was there, for the 60
# text users (50, and 10 new since the update): split-block blocks in one row (version 1)
# where they fit a row of 1,416 bytes, else the static filter in parts (version 2).
psql_at "$PORT" "$db" -q -c "SET client_min_messages = warning" -c "CALL seen_bloom.compact('text_impressions', 0)"
compacted="$(psql_at "$PORT" "$db" -At -c "SELECT (SELECT count(DISTINCT user_key) FROM text_impressions_seen WHERE layer = -2),
    (SELECT count(*) FROM text_impressions_seen WHERE layer = -2
        AND NOT (get_byte(bits, 4) = 2 OR get_byte(bits, 4) = 1 AND length(bits) <= 1416 AND segment = 0)),
    (SELECT count(*) FROM text_impressions WHERE NOT seen_bloom.has_seen('text_impressions', user_name, item))")"
IFS='|' read -r c_users c_old c_missed <<<"$compacted"
echo "    compact after the update: $c_users users compacted, $c_old rows not as this build writes them, $c_missed impressions unseen"
{ [ "$c_users" -eq 60 ] && [ "$c_old" -eq 0 ] && [ "$c_missed" -eq 0 ]; } || fail "compact after the update: $compacted"

# Tables tracked before 0.4.0 lack the replica trigger: health() says so, and
# repair_triggers() adds it (an extension script may not create objects it does not own).
repair="$(psql_at "$PORT" "$db" -At <<'SQL'
SET client_min_messages = warning;
SELECT count(*) FROM seen_bloom.health();
SELECT count(*) FROM (SELECT seen_bloom.repair_triggers(impressions) FROM seen_bloom.tracked) r;
SELECT count(*) FROM seen_bloom.health();
SQL
)"
mapfile -t repair_lines <<<"$repair"
echo "    health() after the update: ${repair_lines[0]} problems; repair_triggers() on ${repair_lines[1]} tables; then ${repair_lines[2]} problems"
# (0.4.0 made the replica trigger already: nothing to repair then.)
{ { [ "${repair_lines[0]}" -gt 0 ] || [ "$old_version" = 0.4.0 ]; } && [ "${repair_lines[2]}" -eq 0 ]; } || fail "health() and repair_triggers() after the update: $repair"

# The update makes the old tables' filter tables depend on the extension (DROP EXTENSION then
# refuses, or with CASCADE takes them along: tests/integration/drop_extension.sh).
unlinked="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM seen_bloom.tracked t
    WHERE NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'seen_bloom'
                      WHERE d.classid = 'pg_class'::regclass AND d.objid = t.filter_table AND d.deptype = 'n')")"
echo "    filter tables not depending on the extension after the update: $unlinked"
[ "$unlinked" = 0 ] || fail "$unlinked filter tables do not depend on the extension after the update"

# Tables tracked before keep their layout (1 before 0.3.0, 2 since); a rebuild works;
# tracking anew takes layout 3.
layouts="$(psql_at "$PORT" "$db" -At <<'SQL'
SET client_min_messages = warning;
SELECT string_agg(layout::text, ',' ORDER BY impressions::text) FROM seen_bloom.tracked;
CALL seen_bloom.rebuild('impressions', 77::bigint);
SELECT seen_bloom.untrack('text_impressions');
SELECT seen_bloom.track('text_impressions', 'user_name', 'item', 'seen_at', "window" => '7 days') IS NOT NULL;
SELECT string_agg(layout::text, ',' ORDER BY impressions::text) FROM seen_bloom.tracked;
SELECT (SELECT count(*) FROM impressions WHERE user_id = 77 AND watch_pct >= 0.5 AND NOT seen_bloom.has_seen('impressions', user_id, post_id)),
       (SELECT count(*) FROM text_impressions WHERE NOT seen_bloom.has_seen('text_impressions', user_name, item));
SQL
)"
# Lines: layouts, untrack's empty void, track's t, layouts, the two counts.
mapfile -t layout_lines <<<"$layouts"
IFS='|' read -r rebuilt_missed retracked_missed <<<"${layout_lines[4]}"
echo "    layouts after the update: ${layout_lines[0]} (impressions, text_impressions); rebuilt user 77 of the layout-1 table misses $rebuilt_missed; after untrack + track: ${layout_lines[3]}, $retracked_missed text impressions missed"
{ [ "${layout_lines[0]}" = "$old_layout,$old_layout" ] && [ "${layout_lines[3]}" = "$old_layout,3" ] && [ "$rebuilt_missed" -eq 0 ] && [ "$retracked_missed" -eq 0 ]; } ||
    fail "layouts after the update: $layouts"
# seen_bloom.relayout: a table of layout 2 (at once) or layout 1 (its users rebuilt in batches)
# moves to layout 3 and keeps every impression, and folds after it are seen.
relayout="$(psql_at "$PORT" "$db" -At -v VERBOSITY=verbose 2>&1 <<'SQL'
SET client_min_messages = warning;
CALL seen_bloom.relayout('impressions');
SELECT layout FROM seen_bloom.tracked WHERE impressions = 'impressions'::regclass;
INSERT INTO impressions (user_id, post_id, watch_pct) VALUES (77, 987654321, 1);
SELECT count(*) FROM impressions WHERE watch_pct >= 0.5 AND NOT seen_bloom.has_seen('impressions', user_id, post_id);
SQL
)" || true
echo "    relayout of the layout-$old_layout table: $(printf '%s' "$relayout" | tr '\n' ' ')"
{ [ "$(printf '%s\n' "$relayout" | sed -n 1p)" = 3 ] && [ "$(printf '%s\n' "$relayout" | sed -n 2p)" = 0 ]; } ||
    fail "relayout of a layout-$old_layout table: $relayout"

# The updated objects equal a fresh install's (definitions, comments, privileges).
catalog_sql="$(cat <<'SQL'
SELECT pg_describe_object(d.classid, d.objid, 0) AS object,
       coalesce(obj_description(d.objid, c.relname), '') AS comment,
       CASE c.relname
       WHEN 'pg_proc' THEN (
           SELECT concat_ws(' | ', p.prokind, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
                            p.prosrc, p.probin, p.provolatile, p.proisstrict, p.proparallel, p.prosecdef,
                            p.proconfig::text, p.proacl::text, p.procost, p.prorows,
                            a.aggtransfn::regprocedure, a.aggfinalfn::regprocedure, a.aggcombinefn::regprocedure,
                            a.aggserialfn::regprocedure, a.aggdeserialfn::regprocedure, a.aggtranstype::regtype,
                            a.aggfinalextra, a.aggfinalmodify)
           FROM pg_proc p LEFT JOIN pg_aggregate a ON a.aggfnoid = p.oid WHERE p.oid = d.objid)
       WHEN 'pg_type' THEN (
           SELECT concat_ws(' | ', t.typtype, t.typlen, t.typinput, t.typoutput, t.typreceive, t.typsend,
                            t.typstorage, t.typalign, t.typcategory, t.typacl::text)
           FROM pg_type t WHERE t.oid = d.objid)
       WHEN 'pg_class' THEN (
           SELECT concat_ws(' | ', r.relkind, r.relacl::text, r.reloptions::text,
                            (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                               || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                               || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''), ', ' ORDER BY a.attnum)
                             FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                             WHERE a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped),
                            (SELECT string_agg(pg_get_indexdef(i.indexrelid), '; ' ORDER BY 1) FROM pg_index i WHERE i.indrelid = r.oid))
           FROM pg_class r WHERE r.oid = d.objid)
       WHEN 'pg_operator' THEN (
           SELECT concat_ws(' | ', o.oprcode::regprocedure, o.oprresult::regtype, o.oprcom::regoperator, o.oprnegate::regoperator)
           FROM pg_operator o WHERE o.oid = d.objid)
       WHEN 'pg_cast' THEN (SELECT concat_ws(' | ', k.castfunc::regprocedure, k.castcontext, k.castmethod) FROM pg_cast k WHERE k.oid = d.objid)
       WHEN 'pg_namespace' THEN (SELECT n.nspacl::text FROM pg_namespace n WHERE n.oid = d.objid)
       ELSE '' END AS definition
FROM pg_depend d JOIN pg_class c ON c.oid = d.classid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'seen_bloom')
UNION ALL
SELECT 'extension', '', concat_ws(' | ', extversion, extrelocatable, extnamespace::regnamespace, extconfig::regclass[]::text, extcondition::text)
FROM pg_extension WHERE extname = 'seen_bloom'
ORDER BY 1, 3;
SQL
)"
psql_at "$PORT" "$fresh_db" -c "CREATE EXTENSION seen_bloom"
psql_at "$PORT" "$db" -At -c "$catalog_sql" >"$WORK/updated.txt"
psql_at "$PORT" "$fresh_db" -At -c "$catalog_sql" >"$WORK/fresh.txt"
objects="$(wc -l <"$WORK/fresh.txt")"
if ! diff -u "$WORK/fresh.txt" "$WORK/updated.txt" >"$WORK/catalog.diff"; then
    head -60 "$WORK/catalog.diff"
    fail "after ALTER EXTENSION UPDATE the objects differ from a fresh install (see the diff: -fresh +updated); add the change to sql/seen_bloom--$old_version--$current_version.sql"
fi
echo "    updated extension objects equal a fresh install's: $objects objects compared"

psql_at "$PORT" postgres -c "DROP DATABASE $db" -c "DROP DATABASE $fresh_db"
echo "    ok"
}

for released in 0.1.0 0.2.0 0.3.0 0.4.0; do
    update_from "$released"
done

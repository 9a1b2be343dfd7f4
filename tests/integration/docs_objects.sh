#!/usr/bin/env bash
# test.sh: one major (the README's objects exist in a fresh install)
# Every SQL object named in the README's reference tables (its "## Reference" section) exists
# in a fresh CREATE EXTENSION seen_bloom, so the reference cannot name what is gone:
#   - functions, procedures (CALL ...) and aggregates by name and kind, in the schema written
#     (the tracking table's unqualified names are in seen_bloom) or the extension's schema;
#   - the type, its casts to and from bytea, its operators and operator class;
#   - relations and views (seen_bloom.tracked, seen_bloom.activity), event triggers, the
#     triggers track makes (on a table this script tracks) and the one on seen_bloom.tracked;
#   - GUCs (seen_bloom.*) in pg_settings once the library is loaded.
# Names with a placeholder (<impressions>_seen) are skipped. The script fails naming each
# object that does not exist, and when it parsed fewer than 20 names (a README whose tables
# it can no longer read must not pass by checking nothing).
# Usage: docs_objects.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_docs_objects
min_names=20

# One line per object: KIND NAME [TABLE] (TABLE: what a trigger is on, when the README says).
parse_reference() {
    awk '
        /^## / { in_ref = ($0 == "## Reference"); next }
        !in_ref { next }
        /^### / { section = $0; next }
        !/^\| / || /^\|---/ { next }
        section ~ /Errors/ { next }
        {
            row = $0
            gsub(/\\\|/, "\001", row)                 # an escaped pipe inside a cell
            n = split(row, cell, "|")
            first = cell[2]
            if (first ~ /^ *(object|function|aggregate|name) *$/) next  # header rows
            if (first ~ /internal functions/) { first = cell[3]; internal = 1 } else internal = 0
            on = ""
            if (match(first, / on `[^`]+`/)) on = substr(first, RSTART + 5, RLENGTH - 6)
            rest = first
            while (match(rest, /`[^`]+`/)) {
                span = substr(rest, RSTART + 1, RLENGTH - 2)
                after = substr(rest, RSTART + RLENGTH, 8)
                rest = substr(rest, RSTART + RLENGTH)
                gsub(/\001/, "|", span)
                if (span == on) continue
                if (span ~ /^a (\|\||=|<>) b$/) { split(span, op, " "); print "operator", op[2]; continue }
                if (span ~ /</ || span ~ /\*/) continue
                if (section ~ /GUCs/) { if (span ~ /^seen_bloom\.[a-z_]+$/) print "guc", span; continue }
                if (span == "bloom") { print "type", span; continue }
                if (span ~ /^[a-z]+::[a-z]+$/) { print "cast", span; continue }
                if (span ~ /_ops$/) { print "opclass", span; continue }
                if (span ~ /^seen_bloom\.[a-z_]+$/) { print "relation", span; continue }
                if (span ~ /\(/) {
                    kind = (section ~ /Aggregates/) ? "aggregate" : "function"
                    if (span ~ /^CALL /) { kind = "procedure"; sub(/^CALL /, "", span) }
                    sub(/\(.*/, "", span)
                    if (section ~ /Impression tracking/ && span !~ /\./) span = "seen_bloom." span
                    print kind, span
                    continue
                }
                if (span ~ /^[a-z_][a-z0-9_]*$/) {
                    if (internal) { print "function", span; continue }
                    if (after ~ /^ \(view\)/) { print "view", "seen_bloom." span; continue }
                    if (first ~ /event triggers/) { print "event_trigger", span; continue }
                    if (first ~ /triggers? /) { print "trigger", span, (on == "" ? "-" : on); continue }
                }
                print "unknown", span
            }
        }' "$ROOT/README.md"
}

mapfile -t objects < <(parse_reference)
names=${#objects[@]}
echo "    parsed $names object names from README.md's reference tables"
[ "$names" -ge "$min_names" ] || fail "only $names names parsed from README.md's Reference (at least $min_names expected): has its layout changed?"
unknown="$(printf '%s\n' "${objects[@]}" | awk '$1 == "unknown" { print $2 }')"
[ -z "$unknown" ] || fail "names in README.md's reference tables of no known kind: $(echo "$unknown" | tr '\n' ' ')"

# The list as SQL rows (kind, name, table).
values="$(printf '%s\n' "${objects[@]}" | awk '
    { gsub(/\x27/, "\x27\x27"); printf "%s(\x27%s\x27, \x27%s\x27, \x27%s\x27)", (NR > 1 ? ",\n" : ""), $1, $2, ($3 == "" ? "-" : $3) }')"

on_exit psql_at "$PORT" postgres -c "DROP DATABASE IF EXISTS $db"
recreate_database "$PORT" "$db"
missing="$(psql_at "$PORT" "$db" -At <<SQL
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
LOAD 'seen_bloom';
CREATE TABLE docs_imp (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now());
SELECT FROM seen_bloom.track('docs_imp', 'user_id', 'post_id', 'seen_at');
WITH ext AS (SELECT e.extnamespace AS nsp, n.nspname FROM pg_extension e
             JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'seen_bloom'),
want(kind, name, on_table) AS (VALUES
$values
),
named AS (
    SELECT w.*, CASE WHEN w.name LIKE '%.%' THEN split_part(w.name, '.', 1) ELSE ext.nspname END AS schema,
           CASE WHEN w.name LIKE '%.%' THEN split_part(w.name, '.', 2) ELSE w.name END AS object,
           to_regtype(format('%I.bloom', ext.nspname)) AS bloom
    FROM want w, ext)
SELECT kind || ' ' || name FROM named WHERE NOT CASE kind
    WHEN 'function' THEN EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                                 WHERE n.nspname = schema AND p.proname = object AND p.prokind = 'f')
    WHEN 'procedure' THEN EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                                  WHERE n.nspname = schema AND p.proname = object AND p.prokind = 'p')
    WHEN 'aggregate' THEN EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                                  WHERE n.nspname = schema AND p.proname = object AND p.prokind = 'a')
    WHEN 'type' THEN to_regtype(format('%I.%I', schema, object)) IS NOT NULL
    WHEN 'cast' THEN EXISTS (SELECT FROM pg_cast c
                             WHERE c.castsource = CASE split_part(name, '::', 1) WHEN 'bloom' THEN bloom ELSE to_regtype(split_part(name, '::', 1)) END
                               AND c.casttarget = CASE split_part(name, '::', 2) WHEN 'bloom' THEN bloom ELSE to_regtype(split_part(name, '::', 2)) END)
    WHEN 'operator' THEN EXISTS (SELECT FROM pg_operator o WHERE o.oprname = name AND o.oprleft = bloom AND o.oprright = bloom)
    WHEN 'opclass' THEN EXISTS (SELECT FROM pg_opclass c JOIN pg_namespace n ON n.oid = c.opcnamespace
                                WHERE n.nspname = schema AND c.opcname = object)
    WHEN 'relation' THEN to_regclass(format('%I.%I', schema, object)) IS NOT NULL
    WHEN 'view' THEN EXISTS (SELECT FROM pg_class c WHERE c.oid = to_regclass(format('%I.%I', schema, object)) AND c.relkind = 'v')
    WHEN 'event_trigger' THEN EXISTS (SELECT FROM pg_event_trigger t WHERE t.evtname = name)
    WHEN 'trigger' THEN EXISTS (SELECT FROM pg_trigger t WHERE t.tgname = name
                                  AND t.tgrelid = to_regclass(CASE on_table WHEN '-' THEN 'docs_imp' ELSE on_table END))
    WHEN 'guc' THEN EXISTS (SELECT FROM pg_settings s WHERE s.name = named.name)
    ELSE false END
ORDER BY 1;
SQL
)"
if [ -n "$missing" ]; then
    fail "named in README.md's reference tables but missing from a fresh install: $(echo "$missing" | tr '\n' ';')"
fi
printf '%s\n' "${objects[@]}" | awk '{ n[$1]++ } END { for (k in n) printf "%s %d, ", k, n[k]; print "" }' |
    sed 's/, $//; s/^/    checked: /'
echo "    ok: every one of the $names objects exists"

#!/usr/bin/env bash
# test.sh: one major (red team: roles attack the extension)
# Red team: two ordinary login roles, sb_alice and sb_bob (LOGIN, NOSUPERUSER), attack
# seen_bloom's ownership model (docs/SECURITY.md): no role gains through seen_bloom a right it did
# not already have; everything done for a tracked table runs as that table's owner. Each role
# logs in as itself (psql -U, never SET ROLE from a superuser's session, which hostile code could
# RESET). Hostile code calls public.canary(tag), which records (and warns) who ran it and whether
# that role is a superuser; at the end no canary row or warning may show a superuser, nor a role
# other than the attacker of that tag (sb_alice's own code may run as sb_alice only).
#   1. Code as a superuser from a table owner: postgres tracks sb_alice's a.p with
#      "where" => 'n.k > 0'; she retypes k to her composite type whose implicit cast to int runs
#      her code, then she and sb_bob insert, and postgres runs rebuild, expire, health, stats,
#      compact and filter. Expected: the filter table and generated functions are sb_alice's
#      (though postgres tracked), the ALTER is refused or her cast runs as sb_alice only.
#   2. Forged configuration: postgres grants sb_alice INSERT, UPDATE, DELETE on
#      seen_bloom.tracked by mistake; she adds rows pairing her a.q with sb_bob's b.orders (a
#      table shaped like a filter table) and his b.orders with her a.leak, repoints her tracked
#      a.f at b.orders, inserts, drops, untracks, and postgres runs expire, rebuild, compact and
#      untrack. Expected: refused or no effect: b.orders keeps its owner, rows and (no)
#      triggers, a.leak stays empty.
#   3. Lock squatting: sb_bob holds session advisory locks on every key a user lock could be
#      derived from (the filter table's and the table's OID with the user's hash, low and high
#      32 bits, int8 forms). Expected: sb_alice's inserts (single statements, a transaction that
#      reads its own folds, COMMIT), rebuild of the user and compact each finish in under 2 s.
#   4. Shadowing: sb_bob, granted CREATE on public, plants stealthy look-alikes there (now(),
#      hashint8, =, >, >=, <, -, /, format, unnest, array_agg, item_hash; each calls the canary
#      and then the real thing). With search_path = public, pg_catalog, sb_alice inserts, reads,
#      tracks, untracks and maintains, and postgres maintains. Expected: all succeed and no
#      look-alike runs (a control query shows they fire when named).
#   5. Rules and policies on a filter table: sb_alice adds ON DELETE / ON INSERT rules and a
#      forced row-level security policy calling the canary to her a.r_seen; CREATE TRIGGER
#      there is refused (0A000). postgres runs expire, health, stats, rebuild, compact.
#      Expected: errors or not, her code runs as sb_alice only.
#   6. A view swapped in: a.v tracked by sb_alice with "where" => 'n.item IN (SELECT id FROM
#      a.allowed)'; she replaces the table a.allowed by a view calling the canary; sb_bob
#      inserts, postgres rebuilds, compacts, filters. Expected: the view runs as sb_alice only
#      (skipped when track refuses subqueries).
#   7. Direct calls by sb_bob (no right on a.*): the internal functions (_fold, _lock_users,
#      _exclude_commit_folds, _forget_config, _as_owner, _write_tracked, _rebuild_users,
#      _drop_tracking, _drop_filter_table), track, untrack, rebuild, compact, relayout, expire,
#      repair_triggers, filter, stats, has_seen, unseen, the generated trigger functions and
#      _fold_trigger, DML on seen_bloom.tracked, activity_reset: all refused (42501; 55000
#      where the table's configuration is hidden from him, 22023 from _fold for a filter table
#      not registered as far as he can see; trigger-only functions 39P01 or 0A000). seen_bloom.activity and health() show him nothing of a.*. DDL of his own with
#      seen_bloom_ddl.busy = on and check_function_bodies = off changes nothing of sb_alice's.
#   8. DDL as a hostile owner: sb_bob puts a trigger named seen_bloom_insert on his b.t; sb_alice's
#      ALTER TABLE of her tracked a.d must succeed and leave his trigger alone. sb_bob takes the
#      names of c.s's generated functions in schema c first; sb_alice then postgres track c.s:
#      refused (42710, 42723, 42501) or his functions untouched (owner, body), never called by
#      c.s's triggers, and still there after untrack.
#   9. ATTACH PARTITION: a.parts, with a column of sb_alice's type whose implicit cast runs her
#      code, tracked by postgres with "where" => 'n.k > 0'; she attaches partitions with rows
#      (also with seen_bloom_ddl.busy = on and check_function_bodies = off), she and sb_bob
#      insert, postgres repairs and rebuilds. Expected: her cast runs as sb_alice only.
#  10. Waits: a commit waiting for a user lock that sb_alice holds ends at lock_timeout
#      (55P03), and a cancel ends such a wait (57014); nothing of either transaction stays.
#  11. Settings: a rule of sb_alice on her filter table sets the session's search_path to her
#      schema (with her operator + over bigint there) and work_mem; a superuser's expire and
#      compact run it. Expected: the superuser's settings are unchanged afterwards.
# Needs logins for sb_alice and sb_bob on 127.0.0.1 (start_cluster's initdb --auth=trust allows
# them); the roles and the database are dropped at exit.
# Usage: security.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_security
# Bounded: no statement of any session here (the hostile ones included) runs past 30 s.
export PGOPTIONS="${PGOPTIONS:-} -c statement_timeout=30s"
make_work_dir
LOG="$WORK/messages.log" # every session's output: the canary's warnings are read from it
: >"$LOG"
holder=""
stop_holder() { stop_process "$holder"; }
drop_all() {
    psql_at "$PORT" postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
    psql_at "$PORT" postgres -c "DROP ROLE IF EXISTS sb_alice" -c "DROP ROLE IF EXISTS sb_bob" >/dev/null 2>&1
}
on_exit drop_all
on_exit stop_holder
SKIPPED=()

# --- helpers -----------------------------------------------------------------------------------
# Runs the SQL on stdin in a session of ROLE, logged in as ROLE; errors show their SQLSTATE.
# The output goes to $WORK/out (and the log); returns psql's status.
as_role() { # ROLE
    local status=0
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "$PORT" -U "$1" -d "$db" -f - \
        >"$WORK/out" 2>&1 || status=$?
    cat "$WORK/out" >>"$LOG"
    return "$status"
}
show_out() { sed 's/^/    | /' "$WORK/out"; }
# The SQLSTATE of the first error in $WORK/out (00000: none), and "ok" or "SQLSTATE message".
sqlstate() {
    local code
    code="$(sed -n '/ERROR:  [0-9A-Z]\{5\}:/{s/.*ERROR:  \([0-9A-Z]\{5\}\):.*/\1/p;q}' "$WORK/out")"
    echo "${code:-00000}"
}
outcome() {
    if [ "$CODE" = 00000 ]; then echo ok; else echo "$CODE $(sed -n '/ERROR:  /{s/.*ERROR:  [0-9A-Z]\{5\}: //p;q}' "$WORK/out")"; fi
}
CODE=""
must() { # ROLE WHAT: the SQL on stdin must succeed
    as_role "$1" || { show_out; fail "$2 (as $1) failed"; }
}
attempt() { # ROLE WHAT: the SQL on stdin may fail (its SQLSTATE in CODE); what it did is checked after
    as_role "$1" || true
    CODE="$(sqlstate)"
    note "$2: $(outcome)"
}
expect() { # ROLE WHAT CODE...: the SQL on stdin must end with one of these SQLSTATEs (00000: success)
    local role="$1" what="$2" c
    shift 2
    as_role "$role" || true
    CODE="$(sqlstate)"
    for c in "$@"; do
        if [ "$CODE" = "$c" ]; then
            note "$what: $(outcome)"
            return 0
        fi
    done
    show_out
    fail "$what (as $role): SQLSTATE $CODE, expected $*"
}
q() { psql_at "$PORT" "$db" -At -c "$1"; }
# Sets seen_bloom_ddl.busy = on for the session (when allowed) and check_function_bodies = off.
busy_sql() {
    cat <<'SQL'
DO $$
BEGIN
    PERFORM pg_catalog.set_config('seen_bloom_ddl.busy', 'on', false);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'seen_bloom_ddl.busy not set: %', SQLERRM;
END $$;
SET check_function_bodies = off;
SQL
}

# The role each canary tag's code belongs to: it may run as that role, never as another.
CANARY_OWNERS="('guc', 'sb_alice'), ('attack1', 'sb_alice'), ('attach', 'sb_alice'), ('rule', 'sb_alice'), ('policy', 'sb_alice'),
               ('view', 'sb_alice'), ('trigger', 'sb_alice'), ('shadow', 'sb_bob'), ('ddl', 'sb_bob')"
canary_owner() {
    case "$1" in
    guc | attack1 | attach | rule | policy | view | trigger) echo sb_alice ;;
    shadow | ddl) echo sb_bob ;;
    *) echo '(no tag)' ;;
    esac
}
# Fails when a canary row or warning so far shows a superuser or a role other than its tag's.
check_canary() { # WHAT
    local bad warned
    bad="$(q "SELECT coalesce(string_agg(format('%s as %s (superuser: %s) x%s', c.tag, c.who, c.su, c.n), '; '), '')
              FROM (SELECT tag, who, su, count(*) AS n FROM public.canary GROUP BY 1, 2, 3) c
              LEFT JOIN (VALUES $CANARY_OWNERS) o(tag, who) ON o.tag = c.tag
              WHERE c.su IS NOT false OR o.who IS NULL OR c.who::text <> o.who")"
    warned="$(sed -n 's/.*seen_bloom security canary: tag=\([a-z0-9]*\) who=\([a-z0-9_]*\) su=\([tf]\).*/\1 \2 \3/p' "$LOG" |
        sort | uniq -c | while read -r n tag who su; do
            if [ "$su" != f ] || [ "$who" != "$(canary_owner "$tag")" ]; then echo "$tag as $who (superuser: $su) x$n"; fi
        done)"
    if [ -n "$bad" ] || [ -n "$warned" ]; then
        psql_at "$PORT" "$db" -c "SELECT tag, who, su, count(*) FROM public.canary GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        fail "$1: hostile code ran with another role's rights: rows: ${bad:-none}; warnings: ${warned:-none}"
    fi
    note "$1: canary: $(q "SELECT coalesce(string_agg(format('%s as %s x%s', tag, who, n), ', '), 'no call')
                           FROM (SELECT tag, who, count(*) AS n FROM public.canary GROUP BY 1, 2 ORDER BY 1, 2) s")"
}
# Fails unless TABLE is tracked and its filter table and every trigger function on it (and its
# partitions), but the extension's C trigger, belong to OWNER and are closed to PUBLIC.
check_owned() { # WHAT TABLE OWNER
    local problems
    problems="$(q "
SELECT concat_ws('; ',
    CASE WHEN t.impressions IS NULL THEN 'not tracked' END,
    (SELECT 'its filter table ' || f.oid::regclass || ' belongs to ' || pg_get_userbyid(f.relowner)
     FROM pg_class f WHERE f.oid = t.filter_table AND f.relowner <> '$3'::regrole),
    (SELECT string_agg(DISTINCT p.oid::regprocedure || ' belongs to ' || pg_get_userbyid(p.proowner), ', ')
     FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
     WHERE g.tgrelid IN (SELECT relid FROM pg_partition_tree('$2')) AND NOT g.tgisinternal
       AND p.oid <> 'seen_bloom._fold_trigger'::regproc AND p.proowner <> '$3'::regrole),
    (SELECT string_agg(DISTINCT p.oid::regprocedure || ' is executable by PUBLIC', ', ')
     FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
     WHERE g.tgrelid IN (SELECT relid FROM pg_partition_tree('$2')) AND NOT g.tgisinternal
       AND p.oid <> 'seen_bloom._fold_trigger'::regproc AND has_function_privilege('public', p.oid, 'EXECUTE')))
FROM (SELECT 1) one LEFT JOIN seen_bloom.tracked t ON t.impressions = '$2'::regclass")"
    [ -z "$problems" ] || fail "$1: $2: $problems"
    note "$1: the filter table and the trigger functions of $2 belong to $3, closed to PUBLIC"
}
# a.p's k as a literal of its type (sb_alice's type when the ALTER of attack 1 went through).
K_EVIL=""
kv() { if [ -n "$K_EVIL" ]; then echo "ROW($1)::a.evil1"; else echo "$1"; fi; }

# --- set-up ------------------------------------------------------------------------------------
setup() {
    step "Set-up: roles sb_alice, sb_bob; schemas a (sb_alice), b (sb_bob), c (postgres, both create); the canary"
    recreate_database "$PORT" "$db"
    psql_at "$PORT" postgres -o /dev/null <<'SQL'
SET client_min_messages = warning;
DROP ROLE IF EXISTS sb_alice;
DROP ROLE IF EXISTS sb_bob;
CREATE ROLE sb_alice LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
CREATE ROLE sb_bob LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
SQL
    must postgres "set-up" <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
-- PostgreSQL 15's default on every major: nobody creates in public unless granted (attack 4).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
CREATE SCHEMA a AUTHORIZATION sb_alice;
CREATE SCHEMA b AUTHORIZATION sb_bob;
CREATE SCHEMA c;
GRANT USAGE, CREATE ON SCHEMA c TO sb_alice, sb_bob;
CREATE TABLE public.canary (who name NOT NULL, su boolean, tag text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT ON public.canary TO PUBLIC;
-- Hostile code calls it: who ran it, and whether that role is a superuser. The warning comes
-- first and survives a rollback of the row (or a context where the row cannot be written).
CREATE FUNCTION public.canary(tag text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    superuser boolean;
BEGIN
    SELECT r.rolsuper INTO superuser FROM pg_catalog.pg_roles r WHERE r.rolname = current_user;
    RAISE WARNING 'seen_bloom security canary: tag=% who=% su=%', tag, current_user, CASE WHEN superuser THEN 't' ELSE 'f' END;
    BEGIN
        INSERT INTO public.canary (who, su, tag) VALUES (current_user, superuser, tag);
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'seen_bloom security canary: the row of % was not written: %', tag, SQLERRM;
    END;
    RETURN true;
END $$;
SQL
    must sb_alice "logging in as sb_alice (the cluster must let it log in on 127.0.0.1)" <<<"SELECT 1"
    must sb_bob "logging in as sb_bob" <<<"SELECT 1"
    # a.r: sb_alice's own table, tracked by her with nothing granted (attacks 3, 4, 5, 7).
    must sb_alice "set-up: sb_alice tracks her table a.r, with no grant" <<'SQL'
CREATE TABLE a.r (user_id bigint NOT NULL, item bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT pg_catalog.now());
INSERT INTO a.r (user_id, item) VALUES (42, 1), (42, 2), (7, 1);
SELECT seen_bloom.track('a.r', 'user_id', 'item', 'seen_at');
-- sb_bob may name her objects, nothing more (he gets INSERT on some tables below).
GRANT USAGE ON SCHEMA a TO sb_bob;
SQL
    check_owned "set-up" a.r sb_alice
}

# --- 1. code as a superuser from a table owner --------------------------------------------------
attack_1() {
    step "1. Code as a superuser from a table owner: her cast in the where predicate of a table postgres tracked"
    must sb_alice "1: a.p, her type a.evil1 with an implicit cast to int" <<'SQL'
CREATE TABLE a.p (user_id bigint NOT NULL, item bigint NOT NULL, k int, seen_at timestamptz NOT NULL DEFAULT pg_catalog.now());
INSERT INTO a.p (user_id, item, k) VALUES (41, 1, 1);
CREATE TYPE a.evil1 AS (v int);
CREATE FUNCTION a.evil1_int(x a.evil1) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.canary('attack1');
    RETURN x.v;
END $$;
CREATE CAST (a.evil1 AS int) WITH FUNCTION a.evil1_int(a.evil1) AS IMPLICIT;
GRANT INSERT ON a.p TO sb_bob;
SQL
    must postgres "1: postgres tracks a.p with \"where\" => 'n.k > 0'" <<'SQL'
SELECT seen_bloom.track('a.p', 'user_id', 'item', 'seen_at', "where" => 'n.k > 0');
SQL
    check_owned "1: though postgres tracked it" a.p sb_alice
    attempt sb_alice "1: ALTER TABLE a.p ALTER COLUMN k TYPE a.evil1 (refused, or her cast runs in the predicate)" <<'SQL'
ALTER TABLE a.p ALTER COLUMN k TYPE a.evil1 USING ROW(k)::a.evil1;
SQL
    if [ "$(q "SELECT atttypid::regtype::text FROM pg_attribute WHERE attrelid = 'a.p'::regclass AND attname = 'k'")" = a.evil1 ]; then
        K_EVIL=1
    fi
    must sb_alice "1: sb_alice inserts into a.p" <<SQL
INSERT INTO a.p (user_id, item, k) VALUES (42, 1, $(kv 1)), (42, 2, $(kv 2));
SQL
    must sb_bob "1: sb_bob inserts into a.p (granted INSERT)" <<SQL
INSERT INTO a.p (user_id, item, k) VALUES (43, 3, $(kv 3));
SQL
    must postgres "1: postgres maintains a.p (rebuild, expire, health, stats, compact, filter)" <<'SQL'
CALL seen_bloom.rebuild('a.p');
CALL seen_bloom.rebuild('a.p', 42::bigint);
SELECT seen_bloom.expire();
SELECT count(*) FROM seen_bloom.health();
SELECT count(*) FROM seen_bloom.stats('a.p');
CALL seen_bloom.compact('a.p', 0);
SELECT seen_bloom.filter('a.p', 42::bigint) IS NOT NULL;
SQL
    # The folds ran (else the canary would prove nothing).
    [ "$(q "SELECT seen_bloom.has_seen('a.p', 42::bigint, 1::bigint) AND seen_bloom.has_seen('a.p', 43::bigint, 3::bigint)")" = t ] ||
        fail "1: the impressions of a.p were not folded"
    check_canary "1"
}

# --- 2. forged configuration --------------------------------------------------------------------
orders_state() {
    if [ "$(q "SELECT to_regclass('b.orders') IS NOT NULL")" != t ]; then
        echo dropped
        return
    fi
    q "SELECT pg_get_userbyid(c.relowner) || ', ' || (SELECT count(*) FROM pg_trigger g WHERE g.tgrelid = c.oid AND NOT g.tgisinternal)
              || ' triggers, ' || (SELECT count(*) || ' rows, ' || md5(coalesce(string_agg(
                     format('%s/%s/%s/%s/%s', o.user_key, o.generation, o.layer, o.segment, encode(o.bits, 'hex')), ','
                     ORDER BY o.user_key, o.generation, o.layer, o.segment), '')) FROM b.orders o)
       FROM pg_class c WHERE c.oid = 'b.orders'::regclass"
}
ORDERS=""
check_orders() { # WHAT
    local now leak
    now="$(orders_state)"
    [ "$now" = "$ORDERS" ] || fail "2: $1: sb_bob's b.orders changed: was $ORDERS, now $now"
    leak="$(q "SELECT count(*) FROM a.leak")"
    [ "$leak" = 0 ] || fail "2: $1: $leak rows made from sb_bob's b.orders in sb_alice's a.leak"
}
attack_2() {
    step "2. Forged configuration: sb_alice granted INSERT, UPDATE, DELETE on seen_bloom.tracked by mistake"
    must sb_bob "2: b.orders, shaped like a filter table" <<'SQL'
CREATE TABLE b.orders (user_key bigint NOT NULL, generation int4 NOT NULL, layer int2 NOT NULL, segment int4 NOT NULL,
                       bits bytea NOT NULL, PRIMARY KEY (user_key, generation, layer, segment));
INSERT INTO b.orders VALUES (42, 0, 0, 7, '\xdeadbeef');
SQL
    ORDERS="$(orders_state)"
    must sb_alice "2: a.f (tracked), a.q, a.leak" <<'SQL'
CREATE TABLE a.f (user_id bigint NOT NULL, item bigint NOT NULL);
SELECT seen_bloom.track('a.f', 'user_id', 'item');
CREATE TABLE a.q (user_id bigint NOT NULL, item bigint NOT NULL);
INSERT INTO a.q VALUES (42, 1);
CREATE TABLE a.leak (LIKE a.f_seen INCLUDING ALL);
SQL
    must postgres "2: the mistaken grant" <<<"GRANT INSERT, UPDATE, DELETE ON seen_bloom.tracked TO sb_alice"

    # a.q paired with b.orders (found by OID: she has no USAGE on schema b).
    attempt sb_alice "2: sb_alice adds a row pairing her a.q with b.orders" <<'SQL'
DO $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    SELECT * INTO STRICT t FROM seen_bloom.tracked x WHERE x.impressions = 'a.f'::regclass;
    t.impressions := 'a.q'::regclass;
    t.filter_table := (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = 'b' AND c.relname = 'orders')::regclass;
    INSERT INTO seen_bloom.tracked SELECT (t).*;
END $$;
SQL
    attempt postgres "2: postgres: expire()" <<<"SELECT seen_bloom.expire()"
    check_orders "expire() with a.q paired with it"
    attempt postgres "2: postgres: rebuild('a.q')" <<<"CALL seen_bloom.rebuild('a.q')"
    check_orders "rebuild('a.q')"
    attempt postgres "2: postgres: compact('a.q', 0)" <<<"CALL seen_bloom.compact('a.q', 0)"
    check_orders "compact('a.q', 0)"
    attempt sb_alice "2: sb_alice: untrack('a.q')" <<<"SELECT seen_bloom.untrack('a.q')"
    check_orders "sb_alice's untrack('a.q')"
    attempt postgres "2: postgres: untrack('a.q')" <<<"SELECT seen_bloom.untrack('a.q')"
    check_orders "postgres's untrack('a.q')"
    attempt sb_alice "2: sb_alice drops a.q" <<<"DROP TABLE a.q"
    check_orders "DROP TABLE a.q"

    # Her tracked a.f repointed at b.orders, then used.
    attempt sb_alice "2: sb_alice points a.f's filter_table at b.orders" <<'SQL'
UPDATE seen_bloom.tracked x
SET filter_table = (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = 'b' AND c.relname = 'orders')::regclass
WHERE x.impressions = 'a.f'::regclass;
SQL
    note "2: a.f's filter table is now $(q "SELECT filter_table FROM seen_bloom.tracked WHERE impressions = 'a.f'::regclass")"
    attempt sb_alice "2: sb_alice inserts impressions of user 42 into a.f" <<<"INSERT INTO a.f VALUES (42, 1), (42, 2), (43, 1)"
    check_orders "an insert into a.f"
    attempt sb_alice "2: sb_alice: rebuild('a.f')" <<<"CALL seen_bloom.rebuild('a.f')"
    check_orders "sb_alice's rebuild('a.f')"
    attempt postgres "2: postgres: expire('a.f')" <<<"SELECT seen_bloom.expire('a.f')"
    check_orders "expire('a.f')"
    attempt postgres "2: postgres: rebuild('a.f')" <<<"CALL seen_bloom.rebuild('a.f')"
    check_orders "postgres's rebuild('a.f')"
    attempt sb_alice "2: sb_alice: untrack('a.f')" <<<"SELECT seen_bloom.untrack('a.f')"
    check_orders "sb_alice's untrack('a.f')"

    # His b.orders as the impressions of her a.leak: a rebuild would copy his rows into hers.
    attempt sb_alice "2: sb_alice adds a row making b.orders an impressions table of her a.leak" <<'SQL'
DO $$
DECLARE
    t seen_bloom.tracked;
BEGIN
    SELECT * INTO STRICT t FROM seen_bloom.tracked x WHERE x.impressions = 'a.r'::regclass;
    t.impressions := (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = 'b' AND c.relname = 'orders')::regclass;
    t.filter_table := 'a.leak'::regclass;
    t.user_column := 'user_key';
    t.item_column := 'segment';
    t.time_column := NULL;
    t.item_type := 'integer'::regtype;
    t."where" := NULL;
    INSERT INTO seen_bloom.tracked SELECT (t).*;
END $$;
SQL
    attempt postgres "2: postgres: rebuild('b.orders')" <<<"CALL seen_bloom.rebuild('b.orders')"
    check_orders "rebuild('b.orders') into a.leak"
    attempt postgres "2: postgres: compact('b.orders', 0)" <<<"CALL seen_bloom.compact('b.orders', 0)"
    check_orders "compact('b.orders', 0) into a.leak"
    attempt postgres "2: postgres: filter('b.orders', 42)" <<<"SELECT seen_bloom.filter('b.orders', 42::bigint)"
    # A filter built from his rows would be a read of b.orders she has no right to.
    expect sb_alice "2: sb_alice: filter(b.orders by OID, 42)" 42501 55000 <<'SQL'
SELECT seen_bloom.filter((SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE n.nspname = 'b' AND c.relname = 'orders')::regclass, 42::bigint);
SQL
    attempt postgres "2: postgres: expire()" <<<"SELECT seen_bloom.expire()"
    check_orders "expire() with the forged rows"

    # Clean up what got in, then the grant goes.
    attempt sb_alice "2: sb_alice puts a.f's row back (if a.f is still tracked)" <<'SQL'
UPDATE seen_bloom.tracked SET filter_table = to_regclass('a.f_seen')
WHERE impressions = 'a.f'::regclass AND to_regclass('a.f_seen') IS NOT NULL;
SQL
    attempt postgres "2: postgres removes the forged rows and revokes the grant" <<'SQL'
DELETE FROM seen_bloom.tracked x
WHERE x.impressions::oid NOT IN (SELECT c.oid FROM pg_class c)
   OR x.impressions = 'b.orders'::regclass
   OR x.filter_table IN ('b.orders'::regclass, 'a.leak'::regclass);
REVOKE INSERT, UPDATE, DELETE ON seen_bloom.tracked FROM sb_alice;
SQL
    q "REVOKE INSERT, UPDATE, DELETE ON seen_bloom.tracked FROM sb_alice" >/dev/null
    check_orders "the end of attack 2"
    note "2: b.orders: $ORDERS (unchanged); a.leak: empty"
}

# --- 3. lock squatting --------------------------------------------------------------------------
bob_sleeping() {
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'sb_bob' AND datname = current_database()
                AND state = 'active' AND query LIKE 'SELECT pg_sleep%'")" = 1 ]
}
timed() { # WHAT: the SQL on stdin, as sb_alice, must succeed in under 2 s (3: while sb_bob holds his locks)
    local t0 ms
    t0="$(date +%s%N)"
    as_role sb_alice || { show_out; fail "${ATTACK:-3}: $1 failed"; }
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$ms" -lt 2000 ] || fail "${ATTACK:-3}: $1 took $ms ms"
    note "${ATTACK:-3}: $1: $ms ms"
}
attack_3() {
    step "3. Lock squatting: sb_bob holds advisory locks on every key user 42's lock could have"
    local locks
    # Bounded: his session sleeps 20 s at most, and is ended below.
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U sb_bob -d "$db" -c "
DO \$\$
DECLARE
    f int8 := 'a.r_seen'::regclass::oid::int8;
    t int8 := 'a.r'::regclass::oid::int8;
    h int8 := seen_bloom.item_hash(42::bigint);
    k record;
BEGIN
    -- (int4, int4): either OID with the low and the high 32 bits of the user's hash, the user, 0.
    FOR k IN SELECT DISTINCT ((o + 2147483648) % 4294967296 - 2147483648)::int4 AS k1, v::int4 AS k2
             FROM unnest(ARRAY[f, t]) o, unnest(ARRAY[(h << 32) >> 32, h >> 32, 42, 0]) v LOOP
        PERFORM pg_advisory_lock(k.k1, k.k2);
    END LOOP;
    -- int8: the hash, either OID with the hash's low 32 bits or the user, the user, the OIDs.
    FOR k IN SELECT DISTINCT v AS k1
             FROM unnest(ARRAY[h, (f << 32) | (h & 4294967295), (t << 32) | (h & 4294967295), (f << 32) | 42, 42, f, t]) v LOOP
        PERFORM pg_advisory_lock(k.k1);
    END LOOP;
END \$\$" -c "SELECT pg_sleep(20)" >"$WORK/bob.out" 2>&1 &
    holder=$!
    wait_until 10 bob_sleeping || { cat "$WORK/bob.out"; fail "3: sb_bob's session did not take its locks"; }
    locks="$(q "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                WHERE a.usename = 'sb_bob' AND l.locktype = 'advisory' AND l.granted")"
    [ "$locks" -ge 10 ] || fail "3: sb_bob holds only $locks advisory locks"
    note "3: sb_bob holds $locks advisory locks"
    timed "an INSERT of user 42 (folded at commit)" <<'SQL'
SET statement_timeout = '3s';
SET lock_timeout = '3s';
INSERT INTO a.r (user_id, item) VALUES (42, 1001), (42, 1002);
SQL
    timed "INSERTs in a transaction that reads its folds, then COMMIT" <<'SQL'
SET statement_timeout = '3s';
SET lock_timeout = '3s';
BEGIN;
INSERT INTO a.r (user_id, item) VALUES (42, 1003);
INSERT INTO a.r (user_id, item) SELECT 42, g FROM generate_series(1004, 1010) g;
SELECT seen_bloom.has_seen('a.r', 42::bigint, 1003::bigint);
INSERT INTO a.r (user_id, item) VALUES (42, 1011), (7, 1011);
COMMIT;
SQL
    timed "another INSERT of user 42" <<'SQL'
SET statement_timeout = '3s';
SET lock_timeout = '3s';
INSERT INTO a.r (user_id, item) VALUES (42, 1012);
SQL
    timed "rebuild of user 42" <<'SQL'
SET statement_timeout = '3s';
SET lock_timeout = '3s';
CALL seen_bloom.rebuild('a.r', 42::bigint);
SQL
    timed "compact of a.r" <<'SQL'
SET statement_timeout = '3s';
SET lock_timeout = '3s';
CALL seen_bloom.compact('a.r', 0);
SQL
    kill -0 "$holder" 2>/dev/null || { cat "$WORK/bob.out"; fail "3: sb_bob's session ended before sb_alice's statements did"; }
    q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'sb_bob' AND datname = current_database()" >/dev/null
    wait "$holder" 2>/dev/null || true
    holder=""
    must sb_alice "3: what user 42 saw" <<<"SELECT seen_bloom.unseen('a.r', 42::bigint, ARRAY[1001, 1003, 1010, 1011, 1012, 999999]::bigint[])"
    grep -q '{999999}' "$WORK/out" || { show_out; fail "3: user 42's impressions are not all seen"; }
}

# --- 4. shadowing -------------------------------------------------------------------------------
attack_4() {
    step "4. Shadowing: sb_bob's look-alikes in public, searched first"
    local control after
    must postgres "4: GRANT CREATE ON SCHEMA public TO sb_bob" <<<"GRANT CREATE ON SCHEMA public TO sb_bob"
    # Stealthy: each calls the canary, then does what the real one does.
    must sb_bob "4: look-alikes in public" <<'SQL'
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.hashint8(bigint) RETURNS int LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN pg_catalog.hashint8($1); END $$;
CREATE FUNCTION public.item_hash(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN seen_bloom.item_hash($1); END $$;
CREATE FUNCTION public.format(text, regclass) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN pg_catalog.format($1, $2); END $$;
CREATE FUNCTION public.format(text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN pg_catalog.format($1, $2); END $$;
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN QUERY SELECT pg_catalog.unnest($1); END $$;
CREATE FUNCTION public.shadow_agg(bigint[], bigint) RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN pg_catalog.array_append($1, $2); END $$;
CREATE AGGREGATE public.array_agg(bigint) (SFUNC = public.shadow_agg, STYPE = bigint[]);
CREATE FUNCTION public.shadow_eq8(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.shadow_eq8);
CREATE FUNCTION public.shadow_gt4(int, int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog.>) $2; END $$;
CREATE OPERATOR public.> (LEFTARG = int, RIGHTARG = int, FUNCTION = public.shadow_gt4);
CREATE FUNCTION public.shadow_ge4(int, int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog.>=) $2; END $$;
CREATE OPERATOR public.>= (LEFTARG = int, RIGHTARG = int, FUNCTION = public.shadow_ge4);
CREATE FUNCTION public.shadow_lt4(int, int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog.<) $2; END $$;
CREATE OPERATOR public.< (LEFTARG = int, RIGHTARG = int, FUNCTION = public.shadow_lt4);
CREATE FUNCTION public.shadow_ge_tz(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog.>=) $2; END $$;
CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.shadow_ge_tz);
CREATE FUNCTION public.shadow_minus(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog.-) $2; END $$;
CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.shadow_minus);
CREATE FUNCTION public.shadow_div(float8, bigint) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('shadow'); RETURN $1 OPERATOR(pg_catalog./) $2::float8; END $$;
CREATE OPERATOR public./ (LEFTARG = float8, RIGHTARG = bigint, FUNCTION = public.shadow_div);
SQL
    # Control: they fire when a query does not pin its names.
    must sb_bob "4: control: sb_bob calls them with public first" <<'SQL'
SET search_path = public, pg_catalog;
SELECT now() IS NOT NULL, 1::bigint = 1::bigint, 2 > 1, format('%s', 'x'::text);
SQL
    control="$(q "SELECT count(*) FROM public.canary WHERE tag = 'shadow'")"
    [ "$control" -ge 4 ] || fail "4: control: the look-alikes did not fire ($control calls)"
    must postgres "4: postgres tracks a.s4 with public first" <<'SQL'
SET search_path = public, pg_catalog;
CREATE TABLE a.s4 (user_id bigint NOT NULL, item bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT pg_catalog.now());
ALTER TABLE a.s4 OWNER TO sb_alice;
SELECT seen_bloom.track('a.s4', 'user_id', 'item', 'seen_at', "where" => 'n.item > 0');
SQL
    must sb_alice "4: sb_alice inserts, reads, maintains with public first" <<SQL
SET search_path = public, pg_catalog;
INSERT INTO a.r (user_id, item) VALUES (44, 1), (44, 2);
BEGIN;
INSERT INTO a.r (user_id, item) VALUES (44, 3);
SELECT seen_bloom.has_seen('a.r', 44::bigint, 3::bigint);
COMMIT;
UPDATE a.r SET item = 4 WHERE user_id OPERATOR(pg_catalog.=) 44 AND item OPERATOR(pg_catalog.=) 2;
INSERT INTO a.s4 (user_id, item) VALUES (44, 1), (44, 2);
INSERT INTO a.p (user_id, item, k) VALUES (44, 1, $(kv 1));
SELECT seen_bloom.unseen('a.r', 44::bigint, ARRAY[1, 2, 3, 4, 5]::bigint[]);
SELECT seen_bloom.has_seen('a.s4', 44::bigint, 2::bigint);
CALL seen_bloom.rebuild('a.r');
CALL seen_bloom.rebuild('a.r', 44::bigint);
SELECT seen_bloom.expire('a.r');
SELECT seen_bloom.expire();
SELECT count(*) FROM seen_bloom.stats('a.r');
SELECT seen_bloom.filter('a.r', 44::bigint) IS NOT NULL;
SELECT seen_bloom.filter('a.s4', 44::bigint) IS NOT NULL;
CALL seen_bloom.compact('a.r', 0);
SELECT count(*) FROM seen_bloom.health();
SELECT seen_bloom.repair_triggers('a.s4');
TRUNCATE a.s4;
SQL
    must postgres "4: postgres maintains with public first" <<'SQL'
SET search_path = public, pg_catalog;
CALL seen_bloom.rebuild('a.r');
CALL seen_bloom.rebuild('a.p');
CALL seen_bloom.rebuild('a.s4');
SELECT seen_bloom.expire();
SELECT count(*) FROM seen_bloom.health();
SELECT count(*) FROM seen_bloom.stats('a.p');
CALL seen_bloom.compact('a.p', 0);
SELECT seen_bloom.filter('a.p', 42::bigint) IS NOT NULL;
SELECT seen_bloom.untrack('a.s4');
SQL
    after="$(q "SELECT count(*) FROM public.canary WHERE tag = 'shadow'")"
    [ "$(q "SELECT seen_bloom.has_seen('a.r', 44::bigint, 4::bigint)")" = t ] || fail "4: the impressions of user 44 were not folded"
    # The look-alikes go; so does the grant.
    must sb_bob "4: sb_bob drops his look-alikes" <<'SQL'
SELECT 'DROP ROUTINE IF EXISTS ' || p.oid::regprocedure::text || ' CASCADE'
FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proowner = 'sb_bob'::regrole
ORDER BY p.prokind = 'a' DESC \gexec
SQL
    q "REVOKE CREATE ON SCHEMA public FROM sb_bob" >/dev/null
    [ "$(q "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proowner = 'sb_bob'::regrole")" = 0 ] ||
        fail "4: sb_bob's look-alikes are still there"
    [ "$after" = "$control" ] || note "4: the look-alikes were called $((after - control)) more times after the control (see the canary)"
    check_canary "4"
    [ "$after" = "$control" ] || fail "4: sb_bob's look-alikes ran $((after - control)) times in other roles' statements"
}

# --- 5. rules, triggers and policies on a filter table ------------------------------------------
attack_5() {
    step "5. Rules, a trigger and a policy on sb_alice's filter table a.r_seen"
    # A row of a generation long gone, so that expire deletes one.
    must sb_alice "5: an old row in a.r_seen" <<<"INSERT INTO a.r_seen (user_key, generation, layer, segment, bits) VALUES (45, 0, 0, 0, '\\x00')"
    must sb_alice "5: sb_alice's trigger function" <<'SQL'
CREATE FUNCTION a.sneaky() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('trigger'); RETURN NULL; END $$;
SQL
    attempt sb_alice "5: CREATE RULE ... ON DELETE TO a.r_seen DO ALSO SELECT public.canary('rule')" <<'SQL'
CREATE RULE canary_delete AS ON DELETE TO a.r_seen DO ALSO SELECT public.canary('rule');
SQL
    attempt sb_alice "5: CREATE RULE ... ON INSERT TO a.r_seen DO ALSO SELECT public.canary('rule')" <<'SQL'
CREATE RULE canary_insert AS ON INSERT TO a.r_seen DO ALSO SELECT public.canary('rule');
SQL
    attempt sb_alice "5: a policy calling the canary, row-level security enabled and forced" <<'SQL'
CREATE POLICY canary_policy ON a.r_seen USING (public.canary('policy'));
ALTER TABLE a.r_seen ENABLE ROW LEVEL SECURITY;
ALTER TABLE a.r_seen FORCE ROW LEVEL SECURITY;
SQL
    expect sb_alice "5: CREATE TRIGGER on a.r_seen" 0A000 <<'SQL'
CREATE TRIGGER sneaky AFTER INSERT OR UPDATE OR DELETE ON a.r_seen FOR EACH ROW EXECUTE FUNCTION a.sneaky();
SQL
    [ "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'a.r_seen'::regclass AND NOT tgisinternal")" = 0 ] ||
        fail "5: a trigger is on a.r_seen"
    attempt sb_alice "5: sb_alice inserts into a.r" <<<"INSERT INTO a.r (user_id, item) VALUES (45, 1), (42, 2001)"
    attempt postgres "5: postgres: expire()" <<<"SELECT seen_bloom.expire()"
    attempt postgres "5: postgres: health()" <<<"SELECT * FROM seen_bloom.health()"
    attempt postgres "5: postgres: stats('a.r')" <<<"SELECT * FROM seen_bloom.stats('a.r')"
    attempt postgres "5: postgres: rebuild('a.r')" <<<"CALL seen_bloom.rebuild('a.r')"
    attempt postgres "5: postgres: rebuild('a.r', 42)" <<<"CALL seen_bloom.rebuild('a.r', 42::bigint)"
    attempt postgres "5: postgres: compact('a.r', 0)" <<<"CALL seen_bloom.compact('a.r', 0)"
    attempt postgres "5: postgres: expire('a.r')" <<<"SELECT seen_bloom.expire('a.r')"
    check_canary "5"
    must sb_alice "5: sb_alice takes her rules and policy off" <<'SQL'
DROP RULE IF EXISTS canary_delete ON a.r_seen;
DROP RULE IF EXISTS canary_insert ON a.r_seen;
DROP POLICY IF EXISTS canary_policy ON a.r_seen;
ALTER TABLE a.r_seen NO FORCE ROW LEVEL SECURITY;
ALTER TABLE a.r_seen DISABLE ROW LEVEL SECURITY;
SQL
}

# --- 6. a view swapped in -----------------------------------------------------------------------
attack_6() {
    step "6. A view swapped in for a table that a.v's where predicate reads"
    must sb_alice "6: a.allowed, a.v" <<'SQL'
CREATE TABLE a.allowed (id bigint PRIMARY KEY);
INSERT INTO a.allowed VALUES (1), (2), (3);
CREATE TABLE a.v (user_id bigint NOT NULL, item bigint NOT NULL);
INSERT INTO a.v VALUES (46, 2);
GRANT INSERT ON a.v TO sb_bob;
SQL
    attempt sb_alice "6: sb_alice tracks a.v with \"where\" => 'n.item IN (SELECT id FROM a.allowed)'" <<'SQL'
SELECT seen_bloom.track('a.v', 'user_id', 'item', "where" => 'n.item IN (SELECT id FROM a.allowed)');
SQL
    if [ "$CODE" != 00000 ]; then
        skip_part "attack 6" "track refuses a subquery in the where predicate ($CODE)"
        SKIPPED+=("6 (track refused the subquery, $CODE)")
        return
    fi
    must sb_alice "6: a.allowed becomes a view calling the canary" <<'SQL'
DROP TABLE a.allowed;
CREATE VIEW a.allowed AS SELECT v.id FROM (VALUES (1::bigint), (2), (3)) v(id) WHERE public.canary('view');
SQL
    must sb_bob "6: sb_bob inserts into a.v" <<<"INSERT INTO a.v VALUES (46, 1), (46, 9)"
    must sb_alice "6: sb_alice inserts into a.v" <<<"INSERT INTO a.v VALUES (46, 3)"
    must postgres "6: postgres: rebuild, compact, filter of a.v" <<'SQL'
CALL seen_bloom.rebuild('a.v');
CALL seen_bloom.compact('a.v', 0);
SELECT seen_bloom.filter('a.v', 46::bigint) IS NOT NULL;
SQL
    [ "$(q "SELECT seen_bloom.has_seen('a.v', 46::bigint, 1::bigint)")" = t ] || fail "6: the impressions of a.v were not folded"
    check_canary "6"
}

# --- 7. direct calls by sb_bob ------------------------------------------------------------------
a_state() {
    q "SELECT md5(coalesce((SELECT string_agg(t::text, ',' ORDER BY t.impressions::oid) FROM seen_bloom.tracked t
                            WHERE t.impressions::oid IN (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'a'::regnamespace)), '')
                  || coalesce((SELECT string_agg(g.tgrelid::regclass || '/' || g.tgname || '/' || g.tgenabled::text || '/' || g.tgfoid::regprocedure,
                                                 ',' ORDER BY g.tgrelid, g.tgname)
                               FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
                               WHERE c.relnamespace = 'a'::regnamespace AND NOT g.tgisinternal), ''))"
}
attack_7() {
    step "7. Direct calls by sb_bob, who has no right on a.*"
    local before f n found=0
    # A table with a problem health() reports (a disabled trigger), for the visibility checks.
    must sb_alice "7: a.h, tracked, a trigger disabled; a.p2, not tracked" <<'SQL'
CREATE TABLE a.h (user_id bigint NOT NULL, item bigint NOT NULL);
SELECT seen_bloom.track('a.h', 'user_id', 'item');
ALTER TABLE a.h DISABLE TRIGGER seen_bloom_update;
CREATE TABLE a.p2 (user_id bigint NOT NULL, item bigint NOT NULL);
SQL
    before="$(a_state)"
    local forged="json_populate_record(NULL::seen_bloom.tracked, '{\"impressions\": \"a.r\", \"filter_table\": \"a.r_seen\",
        \"user_column\": \"user_id\", \"item_column\": \"item\", \"time_column\": \"seen_at\", \"user_type\": \"bigint\",
        \"item_type\": \"bigint\", \"window\": \"30 days\", \"generations\": 5, \"generation_seconds\": 518400,
        \"capacity\": 100000, \"error_rate\": 0.01, \"error_rate_per_generation\": 0.002, \"layout\": 3}')"
    # a.r's own error rate per generation (0.01 over 5 generations and one more); 22023: not a
    # filter table he can see registered (seen_bloom.tracked hides a.r's row from him).
    expect sb_bob "7: _fold into a.r_seen" 42501 22023 <<<"SELECT seen_bloom._fold('a.r_seen'::regclass, 0.01::float8 / 6, 3, ARRAY[1::bigint], ARRAY[1], ARRAY[1::bigint])"
    expect sb_bob "7: _fold (layout 1 form) into a.r_seen" 42501 22023 <<<"SELECT seen_bloom._fold('a.r_seen'::regclass, 0.01::float8 / 6, ARRAY[1::bigint], ARRAY[1], ARRAY[1::bigint])"
    expect sb_bob "7: _lock_users on a.r_seen" 42501 <<<"SELECT seen_bloom._lock_users('a.r_seen', ARRAY[1::bigint])"
    expect sb_bob "7: _lock_users of 300 users on a.r_seen" 42501 <<<"SELECT seen_bloom._lock_users('a.r_seen', ARRAY(SELECT generate_series(1, 300)::bigint))"
    expect sb_bob "7: _exclude_commit_folds on a.r_seen" 42501 <<<"SELECT seen_bloom._exclude_commit_folds('a.r_seen', true)"
    expect sb_bob "7: _forget_config('a.r')" 42501 <<<"SELECT seen_bloom._forget_config('a.r')"
    expect sb_bob "7: _as_owner('a.r', TRUNCATE a.r_seen)" 42501 42883 <<<"SELECT seen_bloom._as_owner('a.r', 'TRUNCATE a.r_seen')"
    expect sb_bob "7: _write_tracked('delete', a.r's row)" 42501 42883 <<<"SELECT seen_bloom._write_tracked('delete', $forged)"
    expect sb_bob "7: _write_tracked('update', a.r's row with a window of 1 s)" 42501 42883 <<<"SELECT seen_bloom._write_tracked('update', jsonb_populate_record($forged, '{\"window\": \"1 second\"}'))"
    expect sb_bob "7: _rebuild_users of a.r" 42501 42883 <<<"SELECT seen_bloom._rebuild_users($forged, ARRAY[42::bigint])"
    expect sb_bob "7: _drop_tracking of a.r" 42501 42883 <<<"SELECT seen_bloom._drop_tracking($forged)"
    expect sb_bob "7: _drop_filter_table of a.r" 42501 42883 <<<"SELECT seen_bloom._drop_filter_table($forged)"
    expect sb_bob "7: untrack('a.r')" 42501 55000 <<<"SELECT seen_bloom.untrack('a.r')"
    expect sb_bob "7: track('a.p2') (sb_alice's table)" 42501 <<<"SELECT seen_bloom.track('a.p2', 'user_id', 'item')"
    expect sb_bob "7: rebuild('a.r')" 42501 55000 <<<"CALL seen_bloom.rebuild('a.r')"
    expect sb_bob "7: rebuild('a.r', 42)" 42501 55000 <<<"CALL seen_bloom.rebuild('a.r', 42::bigint)"
    expect sb_bob "7: compact('a.r', 0)" 42501 55000 <<<"CALL seen_bloom.compact('a.r', 0)"
    expect sb_bob "7: relayout('a.r')" 42501 55000 <<<"CALL seen_bloom.relayout('a.r')"
    expect sb_bob "7: expire('a.r')" 42501 55000 <<<"SELECT seen_bloom.expire('a.r')"
    expect sb_bob "7: repair_triggers('a.r')" 42501 55000 <<<"SELECT seen_bloom.repair_triggers('a.r')"
    expect sb_bob "7: filter('a.r', 1)" 42501 55000 <<<"SELECT seen_bloom.filter('a.r', 1::bigint)"
    expect sb_bob "7: stats('a.r')" 42501 55000 <<<"SELECT * FROM seen_bloom.stats('a.r')"
    expect sb_bob "7: has_seen('a.r', 42, 1)" 42501 55000 <<<"SELECT seen_bloom.has_seen('a.r', 42::bigint, 1::bigint)"
    expect sb_bob "7: unseen('a.r', 42, ...)" 42501 55000 <<<"SELECT seen_bloom.unseen('a.r', 42::bigint, ARRAY[1, 2]::bigint[])"
    expect sb_bob "7: activity_reset()" 42501 <<<"SELECT seen_bloom.activity_reset()"
    expect sb_bob "7: activity_reset('a.r')" 42501 <<<"SELECT seen_bloom.activity_reset('a.r')"
    expect sb_bob "7: UPDATE seen_bloom.tracked" 42501 <<<"UPDATE seen_bloom.tracked SET \"window\" = '1 second'"
    expect sb_bob "7: DELETE FROM seen_bloom.tracked" 42501 <<<"DELETE FROM seen_bloom.tracked"
    expect sb_bob "7: INSERT INTO seen_bloom.tracked" 42501 <<<"INSERT INTO seen_bloom.tracked SELECT ($forged).*"
    expect sb_bob "7: seen_bloom._fold_trigger() called directly" 39P01 42501 0A000 <<<"SELECT seen_bloom._fold_trigger()"
    # The generated functions of sb_alice's tables (and the C trigger's).
    while read -r f; do
        [ -n "$f" ] || continue
        found=$((found + 1))
        expect sb_bob "7: $f called directly" 42501 39P01 0A000 <<<"SELECT $f"
    done < <(q "SELECT p.oid::regprocedure FROM pg_proc p WHERE p.pronamespace = 'a'::regnamespace
                AND p.prorettype = 'trigger'::regtype AND p.proname ~ '_seen_(fold|fold_row|truncate)$' ORDER BY 1")
    note "7: $found generated functions of sb_alice's tables refused"
    # What sb_bob sees of a.*: nothing in health(), nothing in seen_bloom.activity of the tables
    # he has no right on (a.p and a.v take his inserts: their counters are his to see). With
    # the library preloaded (prometheus.sh's cluster checks the rule where counters are live).
    n="$(q "SELECT count(*) FROM seen_bloom.health() h WHERE h.impressions = 'a.h'::regclass")"
    [ "$n" -gt 0 ] || fail "7: health() shows postgres no problem of a.h (its disabled trigger)"
    must sb_alice "7: health() as sb_alice" <<<"SELECT 'a.h rows: ' || count(*) FROM seen_bloom.health() h WHERE h.impressions = 'a.h'::regclass"
    grep -q 'a.h rows: [1-9]' "$WORK/out" || { show_out; fail "7: health() shows sb_alice no problem of her a.h"; }
    must sb_bob "7: health() and seen_bloom.activity as sb_bob" <<'SQL'
SELECT 'health rows of a: ' || count(*) FROM seen_bloom.health() h
WHERE h.impressions::oid IN (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'a'::regnamespace);
SELECT 'activity rows of a: ' || count(*) FROM seen_bloom.activity x
WHERE x.impressions::oid IN (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'a'::regnamespace
    AND NOT has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'));
SQL
    grep -q 'health rows of a: 0' "$WORK/out" || { show_out; fail "7: health() shows sb_bob problems of sb_alice's tables"; }
    grep -q 'activity rows of a: 0' "$WORK/out" || { show_out; fail "7: seen_bloom.activity shows sb_bob sb_alice's tables"; }
    note "7: health() shows sb_bob nothing of a.*, seen_bloom.activity nothing of the tables he has no right on"
    # seen_bloom_ddl.busy and check_function_bodies: his own DDL, and hers refused.
    must sb_bob "7: sb_bob's own DDL with seen_bloom_ddl.busy = on, check_function_bodies = off" < <(busy_sql && cat <<'SQL'
CREATE TABLE b.y (user_id bigint NOT NULL, item bigint NOT NULL);
ALTER TABLE b.y ADD COLUMN note text;
CREATE TABLE b.yp (user_id bigint NOT NULL, item bigint NOT NULL) PARTITION BY RANGE (user_id);
CREATE TABLE b.yp1 PARTITION OF b.yp FOR VALUES FROM (0) TO (10);
DROP TABLE b.y;
DROP TABLE b.yp;
SQL
    )
    expect sb_bob "7: with those set, ALTER TABLE a.r DISABLE TRIGGER seen_bloom_insert" 42501 < <(busy_sql && echo "ALTER TABLE a.r DISABLE TRIGGER seen_bloom_insert;")
    expect sb_bob "7: with those set, DROP TABLE a.r_seen" 42501 < <(busy_sql && echo "DROP TABLE a.r_seen;")
    expect sb_bob "7: with those set, DROP TRIGGER seen_bloom_insert ON a.r" 42501 < <(busy_sql && echo "DROP TRIGGER seen_bloom_insert ON a.r;")
    [ "$(a_state)" = "$before" ] || fail "7: the tracking of sb_alice's tables (configuration or triggers) changed"
    note "7: the configuration and triggers of sb_alice's tables are unchanged"
    note "7: internal functions (but Citus's) PUBLIC may execute: $(q "SELECT coalesce(string_agg(p.proname, ', ' ORDER BY p.proname), 'none')
        FROM (SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'seen_bloom'::regnamespace AND proname LIKE '\\_%'
              AND proname NOT LIKE '\\_citus%' AND has_function_privilege('public', oid, 'EXECUTE')) p")"
}

# --- 8. DDL as a hostile owner ------------------------------------------------------------------
bob_functions() {
    q "SELECT coalesce(string_agg(p.proname || '/' || pg_get_userbyid(p.proowner) || '/' || p.prosecdef || '/' || md5(p.prosrc), ', '
                                  ORDER BY p.proname), 'none')
       FROM pg_proc p WHERE p.pronamespace = 'c'::regnamespace AND p.proname IN ('s_seen_fold', 's_seen_fold_row', 's_seen_truncate')"
}
attack_8() {
    step "8. DDL as a hostile owner"
    local functions
    must sb_alice "8: a.d, tracked" <<'SQL'
CREATE TABLE a.d (user_id bigint NOT NULL, item bigint NOT NULL);
SELECT seen_bloom.track('a.d', 'user_id', 'item');
SQL
    must sb_bob "8: b.t with a trigger named seen_bloom_insert" <<'SQL'
CREATE TABLE b.t (x int);
CREATE FUNCTION b.t_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('ddl'); RETURN NULL; END $$;
CREATE TRIGGER seen_bloom_insert AFTER INSERT ON b.t FOR EACH STATEMENT EXECUTE FUNCTION b.t_audit();
SQL
    must sb_alice "8: sb_alice alters her tracked a.d" <<'SQL'
ALTER TABLE a.d ADD COLUMN note text;
ALTER TABLE a.d RENAME COLUMN item TO item_id;
INSERT INTO a.d (user_id, item_id) VALUES (47, 1);
SQL
    [ "$(q "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'b.t'::regclass AND tgname = 'seen_bloom_insert'")" = 1 ] ||
        fail "8: sb_alice's ALTER TABLE took sb_bob's trigger seen_bloom_insert off b.t"
    [ "$(q "SELECT seen_bloom.has_seen('a.d', 47::bigint, 1::bigint)")" = t ] || fail "8: a.d's impressions are not folded after the ALTER"
    must sb_bob "8: sb_bob's trigger on b.t still fires" <<<"INSERT INTO b.t VALUES (1)"
    note "8: sb_bob's trigger seen_bloom_insert on b.t is untouched; a.d altered and folding"

    must sb_bob "8: sb_bob takes the names of c.s's generated functions" <<'SQL'
CREATE FUNCTION c.s_seen_fold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('ddl'); RETURN NULL; END $$;
CREATE FUNCTION c.s_seen_fold_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('ddl'); RETURN NULL; END $$;
CREATE FUNCTION c.s_seen_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.canary('ddl'); RETURN NULL; END $$;
SQL
    functions="$(bob_functions)"
    must sb_alice "8: c.s" <<'SQL'
CREATE TABLE c.s (user_id bigint NOT NULL, item bigint NOT NULL);
INSERT INTO c.s VALUES (48, 1);
GRANT INSERT ON c.s TO sb_bob;
SQL
    expect sb_alice "8: sb_alice tracks c.s" 00000 42710 42723 42501 <<<"SELECT seen_bloom.track('c.s', 'user_id', 'item', \"where\" => 'n.item > 0')"
    [ "$(bob_functions)" = "$functions" ] || fail "8: sb_alice's track changed sb_bob's functions: $functions -> $(bob_functions)"
    if [ "$(q "SELECT count(*) FROM seen_bloom.tracked WHERE impressions = 'c.s'::regclass")" = 0 ]; then
        expect postgres "8: postgres tracks c.s" 00000 42710 42723 42501 <<<"SELECT seen_bloom.track('c.s', 'user_id', 'item', \"where\" => 'n.item > 0')"
        [ "$(bob_functions)" = "$functions" ] || fail "8: postgres's track changed sb_bob's functions: $functions -> $(bob_functions)"
    fi
    if [ "$(q "SELECT count(*) FROM seen_bloom.tracked WHERE impressions = 'c.s'::regclass")" = 1 ]; then
        [ "$(q "SELECT count(*) FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
                 WHERE g.tgrelid = 'c.s'::regclass AND p.proowner = 'sb_bob'::regrole")" = 0 ] ||
            fail "8: c.s's triggers call sb_bob's functions"
        must sb_bob "8: sb_bob inserts into c.s" <<<"INSERT INTO c.s VALUES (48, 2)"
        must sb_alice "8: sb_alice untracks c.s" <<<"SELECT seen_bloom.untrack('c.s')"
        [ "$(bob_functions)" = "$functions" ] || fail "8: untrack('c.s') changed sb_bob's functions: $functions -> $(bob_functions)"
        note "8: c.s was tracked without sb_bob's functions; they are untouched"
    else
        note "8: tracking c.s was refused; sb_bob's functions are untouched"
    fi
    check_canary "8"
}

# --- 9. ATTACH PARTITION ------------------------------------------------------------------------
attack_9() {
    step "9. ATTACH PARTITION into a table tracked with a where predicate over sb_alice's type"
    must sb_alice "9: a.evil9 (an implicit cast to int), a.parts, a partition with a row" <<'SQL'
CREATE TYPE a.evil9 AS (v int);
CREATE FUNCTION a.evil9_int(x a.evil9) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.canary('attach');
    RETURN x.v;
END $$;
CREATE CAST (a.evil9 AS int) WITH FUNCTION a.evil9_int(a.evil9) AS IMPLICIT;
CREATE TABLE a.parts (user_id bigint NOT NULL, item bigint NOT NULL, k a.evil9, seen_at timestamptz NOT NULL DEFAULT pg_catalog.now())
    PARTITION BY RANGE (user_id);
CREATE TABLE a.parts_1 PARTITION OF a.parts FOR VALUES FROM (0) TO (1000);
INSERT INTO a.parts (user_id, item, k) VALUES (50, 1, ROW(1)::a.evil9);
GRANT INSERT ON a.parts TO sb_bob;
SQL
    attempt postgres "9: postgres tracks a.parts with \"where\" => 'n.k > 0'" <<'SQL'
SELECT seen_bloom.track('a.parts', 'user_id', 'item', 'seen_at', "where" => 'n.k > 0');
SQL
    if [ "$CODE" != 00000 ]; then
        check_canary "9 (track refused)"
        skip_part "attack 9" "track refused the predicate over sb_alice's type ($CODE)"
        SKIPPED+=("9 (track refused the predicate over a type of the owner's, $CODE)")
        return
    fi
    check_owned "9: though postgres tracked it" a.parts sb_alice
    must sb_alice "9: sb_alice attaches a.parts_2 with rows, then inserts" <<'SQL'
CREATE TABLE a.parts_2 (LIKE a.parts INCLUDING DEFAULTS);
INSERT INTO a.parts_2 (user_id, item, k) VALUES (1500, 1, ROW(1)::a.evil9), (1500, 2, ROW(2)::a.evil9);
ALTER TABLE a.parts ATTACH PARTITION a.parts_2 FOR VALUES FROM (1000) TO (2000);
INSERT INTO a.parts_2 (user_id, item, k) VALUES (1500, 3, ROW(3)::a.evil9);
INSERT INTO a.parts (user_id, item, k) VALUES (1500, 4, ROW(4)::a.evil9);
SQL
    must sb_bob "9: sb_bob inserts into a.parts" <<<"INSERT INTO a.parts (user_id, item, k) VALUES (1501, 1, ROW(1)::a.evil9), (51, 1, ROW(1)::a.evil9)"
    must sb_alice "9: with seen_bloom_ddl.busy = on and check_function_bodies = off, sb_alice attaches a.parts_3" < <(busy_sql && cat <<'SQL'
CREATE TABLE a.parts_3 (LIKE a.parts INCLUDING DEFAULTS);
INSERT INTO a.parts_3 (user_id, item, k) VALUES (2500, 1, ROW(1)::a.evil9);
ALTER TABLE a.parts ATTACH PARTITION a.parts_3 FOR VALUES FROM (2000) TO (3000);
CREATE TABLE a.parts_4 PARTITION OF a.parts FOR VALUES FROM (3000) TO (4000);
INSERT INTO a.parts (user_id, item, k) VALUES (2500, 9, ROW(9)::a.evil9), (3500, 1, ROW(1)::a.evil9);
SQL
    )
    must sb_bob "9: sb_bob inserts into a.parts again" <<<"INSERT INTO a.parts (user_id, item, k) VALUES (2501, 1, ROW(1)::a.evil9), (3501, 1, ROW(1)::a.evil9)"
    must postgres "9: postgres repairs and rebuilds a.parts" <<'SQL'
SELECT seen_bloom.repair_triggers('a.parts');
CALL seen_bloom.rebuild('a.parts');
CALL seen_bloom.compact('a.parts', 0);
SELECT seen_bloom.filter('a.parts', 1500::bigint) IS NOT NULL;
SQL
    must sb_bob "9: sb_bob inserts into the repaired a.parts" <<<"INSERT INTO a.parts (user_id, item, k) VALUES (2502, 1, ROW(1)::a.evil9)"
    [ "$(q "SELECT seen_bloom.has_seen('a.parts', 1500::bigint, 1::bigint) AND seen_bloom.has_seen('a.parts', 2500::bigint, 9::bigint)
                   AND seen_bloom.has_seen('a.parts', 2502::bigint, 1::bigint)")" = t ] ||
        fail "9: the impressions of a.parts' partitions were not folded"
    check_canary "9"
}

# Waits for a user lock are ordinary lock waits: lock_timeout ends them, at commit too, and so
# does a cancel. sb_alice holds user 42's lock (rebuild's _lock_users, which also keeps folds
# at commit from skipping user locks) in one session while another commits an impression of
# user 42.
alice_holding() {
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sb_holder' AND datname = current_database()
                AND state = 'active' AND query LIKE 'SELECT pg_sleep%'")" = 1 ]
}
waiter_waiting() {
    [ "$(q "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
                WHERE a.application_name = 'sb_waiter' AND NOT l.granted")" -ge 1 ]
}
attack_10() {
    step "10. A wait for a user lock ends at lock_timeout and at a cancel, at commit"
    local t0 ms waiter
    ATTACK=10
    # Bounded: the holder sleeps 20 s at most, and is ended below.
    PGAPPNAME=sb_holder "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PORT" -U sb_alice -d "$db" \
        -c "BEGIN" -c "SELECT seen_bloom._lock_users('a.r_seen', ARRAY[42::bigint])" -c "SELECT pg_sleep(20)" -c "COMMIT" \
        >"$WORK/holder.out" 2>&1 &
    holder=$!
    wait_until 10 alice_holding || { cat "$WORK/holder.out"; fail "10: the holder did not take user 42's lock"; }
    t0="$(date +%s%N)"
    as_role sb_alice <<'SQL' || true
SET lock_timeout = '1s';
BEGIN;
INSERT INTO a.r (user_id, item) VALUES (42, 3001);
\echo inserted, committing
COMMIT;
SQL
    ms=$((($(date +%s%N) - t0) / 1000000))
    CODE="$(sqlstate)"
    [ "$CODE" = 55P03 ] || { show_out; fail "10: a commit waiting for user 42's lock ended with $CODE, not 55P03 (lock_timeout)"; }
    [ "$ms" -lt 5000 ] || fail "10: lock_timeout = 1s ended the wait after $ms ms"
    note "10: lock_timeout = 1s: $(outcome) after $ms ms ($(grep -q 'inserted, committing' "$WORK/out" && echo at COMMIT || echo at the INSERT))"
    PGAPPNAME=sb_waiter "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h 127.0.0.1 -p "$PORT" -U sb_alice -d "$db" \
        -c "SET lock_timeout = 0" -c "INSERT INTO a.r (user_id, item) VALUES (42, 3002)" >"$WORK/waiter.out" 2>&1 &
    waiter=$!
    wait_until 10 waiter_waiting || { cat "$WORK/waiter.out"; stop_process "$waiter"; fail "10: the second insert did not wait for user 42's lock"; }
    q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'sb_waiter'" >/dev/null
    wait "$waiter" || true
    grep -q 'ERROR:  57014' "$WORK/waiter.out" || { cat "$WORK/waiter.out"; fail "10: a cancel did not end the wait for user 42's lock with 57014"; }
    note "10: a cancel ended the wait: $(sed -n '/ERROR:  /{s/.*ERROR:  //p;q}' "$WORK/waiter.out")"
    q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'sb_holder'" >/dev/null
    wait "$holder" 2>/dev/null || true
    holder=""
    [ "$(q "SELECT count(*) FROM a.r WHERE item IN (3001, 3002)")" = 0 ] || fail "10: an impression of a failed transaction stayed"
    timed "an INSERT of user 42 once the holder is gone" <<'SQL'
SET lock_timeout = '3s';
INSERT INTO a.r (user_id, item) VALUES (42, 3003);
SQL
    [ "$(q "SELECT seen_bloom.has_seen('a.r', 42::bigint, 3003::bigint)")" = t ] || fail "10: user 42's impression after the waits is not seen"
}

# Settings that the owner's code changes stay inside the owner's work: a rule of sb_alice on her
# filter table sets the session's search_path to her schema, where her operator + (bigint,
# bigint) would run for the superuser's next unqualified addition.
attack_11() {
    step "11. The owner's code changes a setting of the superuser's session"
    ATTACK=11
    must sb_alice "11: sb_alice's operator a.+ and a rule on a.r_seen that sets search_path" <<'SQL'
CREATE FUNCTION a.plus(a bigint, b bigint) RETURNS bigint LANGUAGE sql AS
    $$SELECT a OPERATOR(pg_catalog.+) b OPERATOR(pg_catalog.+) CASE WHEN public.canary('guc') THEN 0 ELSE 0 END$$;
CREATE OPERATOR a.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = a.plus);
CREATE FUNCTION a.steer() RETURNS boolean LANGUAGE sql AS
    $$SELECT public.canary('guc') AND pg_catalog.set_config('search_path', 'a, pg_catalog', false) IS NOT NULL
         AND pg_catalog.set_config('work_mem', '7777kB', false) IS NOT NULL$$;
CREATE RULE steer AS ON DELETE TO a.r_seen DO ALSO SELECT a.steer();
SQL
    local shown
    shown="$(psql_at "$PORT" "$db" -At <<'SQL'
SET client_min_messages = warning;
SET search_path = public;
SELECT seen_bloom.expire() >= 0;
CALL seen_bloom.compact('a.r', 0);
SELECT seen_bloom.expire('a.r') >= 0;
SHOW search_path;
SHOW work_mem;
SELECT 1::bigint + 2::bigint;
SQL
)"
    note "11: the superuser's session after expire and compact: $(printf '%s' "$shown" | tr '\n' ' ')"
    [ "$(printf '%s\n' "$shown" | tail -3 | head -1)" = public ] || fail "11: the owner's rule changed the superuser's search_path: $shown"
    [ "$(printf '%s\n' "$shown" | tail -2 | head -1)" != 7777kB ] || fail "11: the owner's rule changed the superuser's work_mem"
    [ "$(q "SELECT count(*) > 0 FROM public.canary WHERE tag = 'guc'")" = t ] || fail "11: the rule never ran (nothing was tested)"
    must sb_alice "11: sb_alice drops her rule" <<<"DROP RULE steer ON a.r_seen"
    check_canary "11"
}

setup
attack_1
attack_2
attack_3
attack_4
attack_5
attack_6
attack_7
attack_8
attack_9
attack_10
attack_11
step "End: every canary row and warning, and sb_bob's b.orders"
check_canary "end"
check_orders "the end"
if [ "${#SKIPPED[@]}" -gt 0 ]; then note "skipped: ${SKIPPED[*]}"; fi
echo "security: 11 attacks ($((11 - ${#SKIPPED[@]})) run), all refused or without effect"

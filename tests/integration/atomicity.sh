#!/usr/bin/env bash
# Atomicity of impression tracking: whatever fails mid-batch, the impression rows and the filter
# rows commit or roll back together. Each failing case runs on users with no filter rows yet,
# and checks, with its SQLSTATE, that afterwards the impressions count and the filter table
# (every row's key and bytes, as one digest) are exactly what they were before, and that none
# of the failed batch's items is reported seen:
#   1. statement_timeout (57014) fired after the fold has written the filter rows, by a later
#      AFTER trigger of the same INSERT that stalls (the rows it saw written are reported);
#   2. statement_timeout swept over 10..800 ms on 20,000-row batches (fires while inserting or
#      while folding; a batch that beats it must be all seen);
#   3. the fold itself fails after the impression rows are in: lock_timeout (55P03) while another
#      session holds the filter table in EXCLUSIVE mode (reads pass, writes wait);
#   4. a constraint error in the same transaction after the insert (23505), and a CHECK
#      violation inside the batch itself (23514);
#   5. ROLLBACK TO SAVEPOINT: the rolled-back batch is seen before, unseen after; the batch
#      before the savepoint commits;
#   6. a deferred foreign key failing at COMMIT (23503).
# Finally the filter rows equal those CALL seen_bloom.rebuild writes from the committed rows.
# Usage: atomicity.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_atomicity
make_work_dir
holder=""
stop_holder() { stop_process "$holder"; }
on_exit stop_holder

recreate_database "$PORT" "$db"
psql_at "$PORT" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE batches (id int PRIMARY KEY);
INSERT INTO batches VALUES (1);
CREATE TABLE receipts (id int PRIMARY KEY);
INSERT INTO receipts VALUES (1);
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL CHECK (post_id > 0),
                          seen_at timestamptz NOT NULL DEFAULT now(),
                          batch_id int NOT NULL DEFAULT 1 REFERENCES batches DEFERRABLE INITIALLY DEFERRED);
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
-- Users 1..50 have a history; each case below uses users of its own (from 1000; the sweep from 100000).
INSERT INTO impressions (user_id, post_id) SELECT u, u * 1000 + k FROM generate_series(1, 50) u, generate_series(1, 60) k;

-- A later AFTER trigger of the same INSERT (triggers fire in name order: seen_bloom_insert
-- first) that, when asked, reports the batch's filter rows and stalls. Layout 3 folds at
-- commit; a read of a user (has_seen) folds what the transaction deferred first, so the
-- batch's rows are written here, before the stall.
CREATE FUNCTION after_fold() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    IF current_setting('atomicity.stall', true) = 'on' THEN
        PERFORM seen_bloom.has_seen('impressions', (SELECT min(user_id) FROM new_rows), 0::bigint);
        SELECT count(*) INTO n FROM impressions_seen f WHERE f.user_key IN (SELECT user_id FROM new_rows);
        RAISE NOTICE 'filter rows of this batch written before the stall: %', n;
        PERFORM pg_sleep(10);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_after_fold AFTER INSERT ON impressions REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION after_fold();

-- Impressions and filter rows, as one line: counts and a digest of every row's key and bytes.
CREATE FUNCTION state() RETURNS text LANGUAGE sql AS $$
SELECT (SELECT count(*) FROM impressions) || ' impressions, ' || count(*) || ' filter rows, digest '
       || md5(coalesce(string_agg(user_key || '/' || generation || '/' || layer || '/' || segment || '/' || encode(bits, 'hex'),
                                  ',' ORDER BY user_key, generation, layer, segment), ''))
FROM impressions_seen $$;
-- How many of users lo..hi have filter rows, and how many of their impressions are seen.
CREATE FUNCTION leaked(lo bigint, hi bigint) RETURNS bigint LANGUAGE sql AS $$
SELECT (SELECT count(*) FROM impressions_seen WHERE user_key BETWEEN lo AND hi)
     + (SELECT count(*) FROM generate_series(lo, hi) u, generate_series(0, 19) k
        WHERE seen_bloom.has_seen('impressions', u, u * 1000 + k)) $$;
SQL

state() { psql_at "$PORT" "$db" -At -c "SELECT state()"; }
# Runs SQL (stdin) that must fail with SQLSTATE $1; prints the server's messages to $WORK/out.
expect_error() {
    local code="$1"
    if psql_at "$PORT" "$db" -v VERBOSITY=verbose >"$WORK/out" 2>&1; then
        cat "$WORK/out"
        fail "expected SQLSTATE $code, the statements succeeded"
    fi
    grep -q "ERROR:  $code:" "$WORK/out" || {
        cat "$WORK/out"
        fail "expected SQLSTATE $code"
    }
}
# The state must be unchanged and users lo..hi unseen.
check_unchanged() {
    local what="$1" before="$2" lo="$3" hi="$4"
    local after leaked
    after="$(state)"
    leaked="$(psql_at "$PORT" "$db" -At -c "SELECT leaked($lo, $hi)")"
    [ "$after" = "$before" ] || fail "$what: state changed: before $before, after $after"
    [ "$leaked" -eq 0 ] || fail "$what: $leaked filter rows or seen items of the failed batch"
    echo "    $what: rolled back together ($after; failed batch's users: no filter rows, nothing seen)"
}
batch() { # VALUES for users lo..hi, 20 items each (item = user * 1000 + k)
    echo "SELECT u, u * 1000 + k FROM generate_series($1, $2) u, generate_series(0, 19) k"
}

echo "    start: $(state)"

# 1. statement_timeout after the fold wrote the filter rows.
before="$(state)"
expect_error 57014 <<SQL
SET atomicity.stall = on;
SET statement_timeout = '1s';
INSERT INTO impressions (user_id, post_id) $(batch 1000 1019);
SQL
written="$(sed -n 's/.*filter rows of this batch written before the stall: \([0-9]*\).*/\1/p' "$WORK/out")"
{ [ -n "$written" ] && [ "$written" -gt 0 ]; } || { cat "$WORK/out"; fail "the stalling trigger did not see the batch's filter rows"; }
check_unchanged "1. statement_timeout (57014) after the fold had written $written filter rows" "$before" 1000 1019

# 2. statement_timeout swept over a large batch.
timed_out=0
committed=0
lo=100000
for ms in 10 25 50 100 200 400 800; do
    hi=$((lo + 999))
    before="$(state)"
    if psql_at "$PORT" "$db" -v VERBOSITY=verbose -c "SET statement_timeout = '${ms}ms'" \
        -c "INSERT INTO impressions (user_id, post_id) $(batch $lo $hi)" >"$WORK/out" 2>&1; then
        committed=$((committed + 1))
        unseen="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM impressions WHERE user_id BETWEEN $lo AND $hi
                                         AND NOT seen_bloom.has_seen('impressions', user_id, post_id)")"
        [ "$unseen" -eq 0 ] || fail "2. a batch that beat the timeout: $unseen impressions not seen"
        echo "    2. statement_timeout ${ms}ms: the 20,000-row batch committed, all seen"
    else
        grep -q "ERROR:  57014:" "$WORK/out" || { cat "$WORK/out"; fail "expected 57014"; }
        timed_out=$((timed_out + 1))
        check_unchanged "2. statement_timeout ${ms}ms (57014) on a 20,000-row batch" "$before" "$lo" "$hi"
    fi
    lo=$((lo + 1000))
done
[ "$timed_out" -gt 0 ] || fail "2. no timeout fired"

# 3. The fold fails: another session holds the filter table in EXCLUSIVE mode (reads pass,
#    writes wait) and the insert's lock_timeout expires inside the trigger's fold.
psql_at "$PORT" "$db" -c "BEGIN" -c "LOCK TABLE impressions_seen IN EXCLUSIVE MODE" -c "SELECT pg_sleep(20)" -c "COMMIT" >/dev/null 2>&1 &
holder=$!
holder_locked() {
    [ "$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM pg_locks WHERE relation = 'impressions_seen'::regclass AND mode = 'ExclusiveLock' AND granted")" -gt 0 ]
}
wait_until 5 holder_locked || fail "3. the lock holder did not get its lock"
before="$(state)"
expect_error 55P03 <<SQL
SET lock_timeout = '300ms';
INSERT INTO impressions (user_id, post_id) $(batch 3000 3019);
SQL
# Only the fold touches impressions_seen during the INSERT (the holder locks nothing else), so
# the 55P03 comes from the fold, whichever trigger runs it (the C trigger names no function).
psql_at "$PORT" "$db" -c "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE relation = 'impressions_seen'::regclass AND mode = 'ExclusiveLock'" >/dev/null
wait "$holder" 2>/dev/null || true
holder=""
check_unchanged "3. lock_timeout (55P03) inside the fold (filter table locked by another session)" "$before" 3000 3019

# 4. A constraint error after the insert in the same transaction, and one inside the batch.
before="$(state)"
expect_error 23505 <<SQL
BEGIN;
INSERT INTO impressions (user_id, post_id) $(batch 4000 4019);
DO \$\$ BEGIN
    IF leaked(4000, 4019) = 0 THEN RAISE EXCEPTION 'CHECK FAILED: the batch is not seen inside its transaction'; END IF;
END \$\$;
INSERT INTO receipts VALUES (1);
COMMIT;
SQL
check_unchanged "4a. unique violation (23505) after the insert, same transaction" "$before" 4000 4019
before="$(state)"
expect_error 23514 <<SQL
INSERT INTO impressions (user_id, post_id) $(batch 4100 4119) UNION ALL SELECT 4100, -1;
SQL
check_unchanged "4b. CHECK violation (23514) by the last row of the batch" "$before" 4100 4119

# 5. ROLLBACK TO SAVEPOINT.
psql_at "$PORT" "$db" -At >"$WORK/out" <<SQL
BEGIN;
INSERT INTO impressions (user_id, post_id) $(batch 5000 5019);
SAVEPOINT s;
INSERT INTO impressions (user_id, post_id) $(batch 5100 5119);
SELECT 'inside, before the rollback: ' || leaked(5100, 5119);
ROLLBACK TO SAVEPOINT s;
SELECT 'inside, after the rollback: ' || leaked(5100, 5119);
COMMIT;
SQL
inside_before="$(sed -n 's/^inside, before the rollback: //p' "$WORK/out")"
inside_after="$(sed -n 's/^inside, after the rollback: //p' "$WORK/out")"
kept="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM impressions WHERE user_id BETWEEN 5000 AND 5019 AND seen_bloom.has_seen('impressions', user_id, post_id)")"
gone="$(psql_at "$PORT" "$db" -At -c "SELECT leaked(5100, 5119) + (SELECT count(*) FROM impressions WHERE user_id BETWEEN 5100 AND 5119)")"
echo "    5. savepoint: rolled-back batch's filter rows + seen items inside the transaction $inside_before, after ROLLBACK TO $inside_after, after COMMIT $gone; batch before the savepoint: $kept of 400 seen"
{ [ "$inside_before" -gt 0 ] && [ "$inside_after" -eq 0 ] && [ "$gone" -eq 0 ] && [ "$kept" -eq 400 ]; } || fail "5. savepoint rollback"

# 6. A deferred foreign key fails at COMMIT.
before="$(state)"
expect_error 23503 <<SQL
BEGIN;
INSERT INTO impressions (user_id, post_id, batch_id) SELECT u, u * 1000 + k, 99 FROM generate_series(6000, 6019) u, generate_series(0, 19) k;
DO \$\$ BEGIN
    IF leaked(6000, 6019) = 0 THEN RAISE EXCEPTION 'CHECK FAILED: the batch is not seen inside its transaction'; END IF;
END \$\$;
COMMIT;
SQL
check_unchanged "6. deferred foreign key (23503) failing at COMMIT" "$before" 6000 6019

# The filter rows equal a rebuild from the committed impressions (exact rows as hash sets).
canonical="SELECT user_key, generation, layer, segment,
       CASE WHEN layer < 0 THEN (SELECT string_agg(h, '' ORDER BY h) FROM (SELECT encode(substr(bits, 8 * i + 1, 8), 'hex') AS h
                                 FROM generate_series(0, length(bits) / 8 - 1) i) s)
            ELSE encode(bits, 'hex') END AS canonical FROM impressions_seen"
psql_at "$PORT" "$db" -c "CREATE TABLE before_rebuild AS $canonical"
psql_at "$PORT" "$db" -c "SET client_min_messages = warning" -c "CALL seen_bloom.rebuild('impressions')"
psql_at "$PORT" "$db" -c "CREATE TABLE after_rebuild AS $canonical"
result="$(psql_at "$PORT" "$db" -At -c "
SELECT (SELECT count(*) FROM before_rebuild b FULL JOIN after_rebuild a USING (user_key, generation, layer, segment)
        WHERE a.canonical IS DISTINCT FROM b.canonical),
       (SELECT count(*) FROM after_rebuild),
       (SELECT count(*) FROM impressions WHERE NOT seen_bloom.has_seen('impressions', user_id, post_id))")"
IFS='|' read -r differ rows unseen <<<"$result"
echo "    end: $(state); $differ of $rows filter rows differ from a rebuild; committed impressions not seen: $unseen"
{ [ "$differ" -eq 0 ] && [ "$unseen" -eq 0 ]; } || fail "the filter does not match its rebuild"
echo "    statement timeouts: $timed_out fired, $committed batches beat theirs"
psql_at "$PORT" postgres -c "DROP DATABASE $db"
echo "    ok"

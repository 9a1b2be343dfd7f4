#!/usr/bin/env bash
# seen_bloom's WAL under PostgreSQL's own replay check, on every major, on a cluster of its own
# (127.0.0.1:25466) with data checksums, seen_bloom preloaded and
# wal_consistency_checking = 'all':
#   - users with layer rows and users with exact rows, on the same pages, take batches from 4
#     clients (layout 3 writes layer rows in place; exact rows get new versions, whose hint
#     bits readers set without WAL), and the layer users 40 items each in one statement (on 15
#     and later some blocks are logged as masks, and the test fails without one); then an
#     immediate stop: crash recovery replays every record against its page image and the
#     server comes back with no "inconsistent page", every impression seen;
#   - 15 and later: the in-place writes are records of the seen_bloom resource manager
#     (pg_walinspect), and with seen_bloom.wal_resource_manager = 0 generic ones, which pass
#     the check as full page images; 13 and 14 write generic full page images while checked;
#   - 15 and later: the in-place writes' records (page images aside) take at most 0.6 of the
#     bytes with seen_bloom's resource manager (the bits set, 32 pages a record) that they
#     take as generic WAL (each changed block's bytes, 4 pages a record);
#   - seen_bloom.wal_resource_manager = 5 stops the server at start with a message naming the
#     allowed values.
# Usage: wal_checks.sh PG_BIN PORT (PORT unused: the test runs its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
port=25466
db=seen_bloom_wal
make_work_dir
cluster="$(cluster_dir rel-wal-checks)"
log="$cluster/server.log"
show_log_on_fail "$log"
q() { psql_at "$port" "$db" -At "$@"; }

cluster_init "$cluster" "$port" "${CHECKED_WAL_CONF[@]}" "checkpoint_timeout = 30s"
cluster_enable_checksums "$cluster"
note "starting PostgreSQL ${PG_MAJOR} on 127.0.0.1:${port} (wal_consistency_checking = 'all', data checksums)"
cluster_start "$cluster"
# The test's database, and two more set up alike for the WAL measurement below.
for d in "$db" "${db}_a" "${db}_b"; do
    psql_at "$port" postgres -c "CREATE DATABASE $d" >/dev/null
    psql_at "$port" "$d" -q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE TABLE impressions (user_id bigint NOT NULL, post_id bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
INSERT INTO impressions (user_id, post_id) SELECT u, u * 100000 + k FROM generate_series(1, 60) u, generate_series(1, 300) k;
INSERT INTO impressions (user_id, post_id) SELECT u, u * 100000 + k FROM generate_series(61, 660) u, generate_series(1, 5) k;
SQL
done
layer_users="$(q -c "SELECT count(DISTINCT user_key) FROM impressions_seen WHERE layer >= 0")"
[ "$layer_users" -gt 0 ] || fail "no user has a layer row: nothing is written in place"

# Batches from 4 clients over users with layer rows (in-place writes at commit, some
# concurrent) and users with exact rows (new row versions on the same pages, whose hint bits
# readers then set without WAL: what generic WAL's mask does not forgive).
# A fold at commit logs several pages a record: such records must be among those replayed.
pgbench_insert_script 660 7 >"$WORK/insert.sql"
load_start="$(q -c "SELECT pg_current_wal_insert_lsn()")"
client_at "$port" pgbench -n -c 4 -j 2 -t 100 -f "$WORK/insert.sql" "$db" >"$WORK/pgbench.out" 2>&1 ||
    { cat "$WORK/pgbench.out"; fail "pgbench"; }
several=""
if [ "${PG_MAJOR}" -ge 15 ]; then
    q -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null
    several="$(q -c "SELECT count(*) FROM pg_get_wal_records_info('$load_start', pg_current_wal_flush_lsn())
                     WHERE resource_manager = 'seen_bloom' AND description !~ '^pages 1,'")"
    [ "$several" -gt 0 ] || fail "no seen_bloom record of several pages among the batches' folds at commit"
    several=", $several records of several pages"
fi
# 40 items for each user with layer rows in one statement: blocks that take two new bits in a
# word are logged as masks (docs/FORMAT.md), which the recovery below replays too.
masks_start="$(q -c "SELECT pg_current_wal_insert_lsn()")"
q -c "INSERT INTO impressions (user_id, post_id) SELECT u, 800000000 + u * 1000 + k FROM generate_series(1, 60) u, generate_series(1, 40) k" >/dev/null
if [ "${PG_MAJOR}" -ge 15 ]; then
    masked="$(q -c "SELECT count(*) FROM pg_get_wal_records_info('$masks_start', pg_current_wal_flush_lsn())
                    WHERE resource_manager = 'seen_bloom' AND description ~ 'masks [1-9]'")"
    [ "$masked" -gt 0 ] || fail "no seen_bloom record with a mask fragment after 40 items per user in one statement"
    several="$several, $masked with masks"
fi
batch() { echo "INSERT INTO impressions (user_id, post_id) SELECT u, $1 + u FROM generate_series(1, 60) u"; }
wal_records_report "$port" "$db" "$(batch 900000000)" "$cluster/data"

recover() { # crash recovery from an immediate stop
    run_pg "$PG_BIN/pg_ctl" -D "$cluster/data" -m immediate -w stop >/dev/null
    cluster_start "$cluster"
    wait_for_server "$port" "$db"
}
recover
missed="$(q -c "SELECT count(*) FROM impressions WHERE NOT seen_bloom.has_seen('impressions', user_id, post_id)")"
rows="$(q -c "SELECT count(*) FROM impressions")"
[ "$missed" = 0 ] || fail "$missed of $rows impressions not seen after crash recovery"
echo "    crash recovery under wal_consistency_checking = 'all': $rows impressions of 660 users, 60 with layer rows ($(pgbench_transactions "$WORK/pgbench.out") batches of 20 from 4 clients${several}), 0 not seen"

# WAL per impression of the same 600 batches of 20 (one client, a fixed random seed) into a
# database set up like the test's, after a checkpoint, with the client's consistency
# checking off (its page images would swamp the figure).
wal_per_impression() { # DB: WAL per impression, then (15 and later) the in-place records' bytes less page images
    local start end
    psql_at "$port" "$1" -c "CHECKPOINT" >/dev/null
    start="$(psql_at "$port" "$1" -At -c "SELECT pg_current_wal_insert_lsn()")"
    PGOPTIONS="-c wal_consistency_checking=" client_at "$port" pgbench -n -c 1 -t 600 --random-seed=7 -f "$WORK/insert.sql" "$1" >"$WORK/pgbench.wal" 2>&1 ||
        { cat "$WORK/pgbench.wal"; fail "pgbench"; }
    end="$(psql_at "$port" "$1" -At -c "SELECT pg_current_wal_insert_lsn()")"
    psql_at "$port" "$1" -At -c "SELECT round(pg_wal_lsn_diff('$end', '$start') / 12000.0, 1)"
    if [ "$PG_MAJOR" -ge 15 ]; then
        psql_at "$port" "$1" -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null 2>&1
        psql_at "$port" "$1" -At -c "SELECT coalesce(sum(record_length - fpi_length), 0) FROM pg_get_wal_records_info('$start', '$end')
                                     WHERE resource_manager IN ('seen_bloom', 'Generic')"
    fi
}

if [ "$PG_MAJOR" -ge 15 ]; then
    { read -r own_wal; read -r own_bytes; } < <(wal_per_impression "${db}_a")
    cluster_stop "$cluster"
    cluster_configure "$cluster" "seen_bloom.wal_resource_manager = 0"
    cluster_start "$cluster"
    { read -r generic_wal; read -r generic_bytes; } < <(wal_per_impression "${db}_b")
    # The same impressions, folded in place alike: bit indices (10 B an item) where generic
    # fragments carry whole blocks (36 B), and fewer records.
    python3 -c "import sys; a, b = int(sys.argv[1]), int(sys.argv[2]); sys.exit(0 if 0 < a <= 0.6 * b else 1)" "$own_bytes" "$generic_bytes" ||
        fail "in-place writes' WAL: $own_bytes B in seen_bloom's records, not at most 0.6 of generic WAL's $generic_bytes B"
    echo "    WAL per impression (the same 600 batches of 20 into twin databases, checking off for the client): $own_wal B with seen_bloom's resource manager, $generic_wal B generic; the in-place writes' records without page images: $own_bytes B against $generic_bytes B"
    start="$(q -c "SELECT pg_current_wal_insert_lsn()")"
    q -c "$(batch 910000000)" >/dev/null
    counts="$(q -F ' ' -c "SELECT resource_manager, count(*) FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE resource_manager IN ('seen_bloom', 'Generic') GROUP BY 1 ORDER BY 1")"
    if [[ "$counts" != "Generic "* ]] || grep -q '^seen_bloom' <<<"$counts"; then
        fail "with seen_bloom.wal_resource_manager = 0 expected generic records only, got: ${counts:-none}"
    fi
    recover
    missed="$(q -c "SELECT count(*) FROM impressions WHERE NOT seen_bloom.has_seen('impressions', user_id, post_id)")"
    [ "$missed" = 0 ] || fail "$missed impressions not seen after crash recovery of generic records"
    echo "    seen_bloom.wal_resource_manager = 0: generic records (${counts}), replayed as full page images after an immediate stop, 0 not seen"

    cluster_stop "$cluster"
    cluster_configure "$cluster" "seen_bloom.wal_resource_manager = 5"
    if pg_start "$PG_BIN" "$cluster" 2>/dev/null; then fail "the server started with seen_bloom.wal_resource_manager = 5"; fi
    grep -q "seen_bloom.wal_resource_manager is 5: it must be 0 or between 128 and 255" "$log" ||
        fail "no message naming seen_bloom.wal_resource_manager's allowed values in the log"
    echo "    seen_bloom.wal_resource_manager = 5: the server does not start; the log says: $(grep -m1 -o 'seen_bloom.wal_resource_manager is 5.*' "$log")"
fi
# (13's immediate stop tells each backend that shared memory is "possibly corrupted")
if grep -Ei "inconsistent page|PANIC:  |TRAP:|terminated by signal|corrupt" "$log" | grep -v "possibly corrupted shared memory"; then
    fail "errors in the server log"
fi
echo "    ok"
